"""Forges: the pull/merge requests of GitHub, GitLab and Gitea, through their REST APIs.

- ``model``  a request as the forge describes it (number, address, open/merged/closed, head),
             the settings of one forge (its token, in memory only), the errors of a call
- ``http``   one bounded HTTP exchange (httpx): the token in a header and nowhere else,
             every text that comes back scrubbed of it and sanitized
- ``apis``   each forge's shapes: create a request, find one by its head branch, get one

What it does not do: decide. Whether a request is the job's, what a merge proves and what to
record is ``delivery.review``'s; the proof of publication is always the branch's content
(``verify.content``), never a forge's word.

May import: ``gitpub.core`` (and httpx, imported when a call is made). Nothing here writes
anything anywhere: a token given to it lives in memory for one command.
"""
