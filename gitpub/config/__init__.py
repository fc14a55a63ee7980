"""The configuration: ``.gitpub.yaml``, committed at the repository root and shared by every
writer node of a site.

- ``model``   the configuration as frozen dataclasses; each key is a field, with its default
- ``schema``  the file's rules, derived from those dataclasses; errors name the file and the key
- ``channel_rules``  the rules of the ``site`` and ``channels`` sections (a mixin of the parser)
- ``load``    reading the file (PyYAML, imported only here), bounded against alias bombs

May import: ``gitpub.core``. Nothing here talks to git: callers hand it the file's location.
"""
