"""Only a workaround: everything else is in pyproject.toml.

setuptools' editable installs (``pip install -e``, PEP 660) mean to install the data files
(the ``git-pub.1`` man page, the shell completions) "as non editable", but ask the distribution
for ``has_data()`` where distutils calls it ``has_data_files()`` (setuptools 68 to 84 at least),
so they silently install none, and ``git pub --help`` finds no man page. This distribution
answers both names; a setuptools that fixes it sees no difference.
"""

from setuptools import setup
from setuptools.dist import Distribution


class _Distribution(Distribution):
    def has_data(self) -> bool:
        return self.has_data_files()


setup(distclass=_Distribution)
