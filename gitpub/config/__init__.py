"""The configuration: ``.gitpub.yaml``, committed at the repository root and shared by every
writer node of a site.

- ``model``   the configuration as frozen dataclasses; each key is a field, with its default
- ``schema``  the file's rules, derived from those dataclasses; errors name the file and the key
- ``channel_rules``  the rules of the ``site`` and ``channels`` sections (a mixin of the parser)
- ``load``    reading the file; the working tree's parsed once per content (a cache in
              ``.git/pub`` keyed by its bytes: an unchanged configuration loads no PyYAML)
- ``yamlread`` the YAML reader (PyYAML, imported only here), strict and bounded against alias
              bombs; front matter is read with it too

May import: ``gitpub.core``. Nothing here talks to git: callers hand it the file's location.
"""
