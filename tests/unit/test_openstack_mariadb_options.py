"""MariaDB's options in the local OpenStack (kuberaven.testing.openstack_config): no option file read, and every
file it writes where its environment says. test_openstack_database.py asks a running server the same."""

from __future__ import annotations

from pathlib import Path

from kuberaven.testing.openstack_config import MariaDBFiles, mariadb_options


def test_no_option_file_is_read_and_every_file_is_the_environments_own(tmp_path: Path) -> None:
    files = MariaDBFiles(tmp_path / "mysql", tmp_path / "mysql-tmp", tmp_path / "mysql.sock", tmp_path / "mysql.pid")
    options = mariadb_options(files)
    assert options[0] == "--no-defaults"  # read only as the first option
    assert options[1:] == [
        f"--datadir={tmp_path / 'mysql'}",
        f"--tmpdir={tmp_path / 'mysql-tmp'}",
        f"--socket={tmp_path / 'mysql.sock'}",
        f"--pid-file={tmp_path / 'mysql.pid'}",
    ]
    assert mariadb_options(MariaDBFiles(**{**files.__dict__, "as_root": True}))[-1] == "--user=root"
