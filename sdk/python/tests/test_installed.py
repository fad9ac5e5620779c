"""The package under test is the one installed from its wheel, never the source tree."""

from pathlib import Path

import dynamo2pc


def test_the_package_is_imported_from_the_installed_wheel_not_the_source_tree():
    where = Path(dynamo2pc.__file__).resolve()
    assert "site-packages" in where.parts, where
    assert "src" not in where.parts, where
