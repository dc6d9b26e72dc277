"""DATABASE_URL may name several hosts; each client gets the form it can read."""

from __future__ import annotations

import pytest
from psycopg.conninfo import conninfo_to_dict
from sqlalchemy.engine import make_url

from service.db import urls
from service.settings import Settings, SettingsError, load_settings

MULTI = "postgresql://app:s%40cret@db1:5432,db2:5433/lineup"


def test_a_multi_host_url_is_split_into_its_hosts() -> None:
    parsed = urls.parse(MULTI + "?sslmode=require")
    assert parsed.hosts == ("db1:5432", "db2:5433")
    assert parsed.userinfo == "app:s%40cret"
    assert parsed.path == "/lineup"
    assert parsed.parameters == ("sslmode",)
    assert parsed.multi_host


def test_several_hosts_default_to_the_writable_one_with_a_connect_timeout() -> None:
    assert urls.psycopg_url(MULTI) == MULTI + "?target_session_attrs=read-write&connect_timeout=3"


def test_what_the_url_says_wins_over_the_defaults() -> None:
    url = MULTI + "?target_session_attrs=primary&connect_timeout=10"
    assert urls.psycopg_url(url) == url


def test_a_single_host_url_is_passed_on_as_written() -> None:
    url = "postgresql://u:p+q@localhost:5432/db?sslmode=disable&options=-c%20x%3Dy"
    assert urls.psycopg_url(url) == url
    assert urls.psycopg_url("postgres://localhost/db") == "postgresql://localhost/db"
    assert urls.psycopg_url("postgresql+psycopg://localhost/db") == "postgresql://localhost/db"


def test_sqlalchemy_gets_the_hosts_as_host_parameters() -> None:
    url = make_url(urls.sqlalchemy_url(MULTI))
    assert url.drivername == "postgresql+psycopg"
    assert url.host is None
    assert url.query["host"] == ("db1:5432", "db2:5433")
    assert url.query["target_session_attrs"] == "read-write"
    assert url.username == "app" and url.password == "s@cret" and url.database == "lineup"


def test_sqlalchemy_gets_a_single_host_url_unchanged_but_for_the_driver() -> None:
    url = make_url(urls.sqlalchemy_url("postgresql://u@localhost:5432/db"))
    assert (url.drivername, url.host, url.port, url.database) == (
        "postgresql+psycopg",
        "localhost",
        5432,
        "db",
    )


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("mysql://h/db", "postgresql://"),
        ("postgresql://h1,,h2/db", "empty host"),
        ("postgresql://h1:5432,/db", "empty host"),
        ("postgresql://h1:5432,h2:port/db", "invalid port"),
        ("postgresql://h1:70000/db", "invalid port"),
        ("postgresql://[::1/db", "closing"),
        ("postgresql://h/db?sslmode", "name=value"),
    ],
)
def test_a_bad_url_says_what_is_wrong(url: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        urls.parse(url)


def test_settings_accept_several_hosts_and_give_psycopg_its_form() -> None:
    settings = Settings(database_url=MULTI)
    assert settings.psycopg_url == urls.psycopg_url(MULTI, settings.connection_parameters)
    assert conninfo_to_dict(settings.psycopg_url)["target_session_attrs"] == "read-write"


def test_every_connection_is_bounded_against_a_vanished_peer_unless_its_url_says_otherwise() -> None:
    """libpq's keepalives, tcp_user_timeout and connect_timeout, from the settings; what the URL
    names itself wins. They are the client's own parameters, never a startup parameter a pooler
    would refuse."""
    url = "postgresql://u@localhost:5432/db?sslmode=disable&keepalives_idle=30"
    settings = Settings(database_url=url, db_tcp_user_timeout_seconds=7, db_connect_timeout_seconds=4)
    parameters = conninfo_to_dict(settings.psycopg_url)
    assert parameters["sslmode"] == "disable"
    assert parameters["keepalives"] == "1"
    assert parameters["keepalives_idle"] == "30"  # the URL's own
    assert parameters["keepalives_interval"] == "1" and parameters["keepalives_count"] == "3"
    assert parameters["tcp_user_timeout"] == "7000"  # libpq's milliseconds
    assert parameters["connect_timeout"] == "4"  # the setting, for one host as for several
    assert "options" not in parameters
    several = conninfo_to_dict(Settings(database_url=MULTI, db_connect_timeout_seconds=4).psycopg_url)
    assert several["connect_timeout"] == "4"
    listen = Settings(
        database_url=url, listen_database_url="postgresql://u@localhost:5433/db"
    ).listen_psycopg_url
    assert listen is not None and conninfo_to_dict(listen)["tcp_user_timeout"] == "5000"


def test_settings_name_the_variable_of_a_bad_host_list(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DATABASE_URL", "postgresql://db1:5432,db2:x/lineup")
    with pytest.raises(SettingsError, match=r"DATABASE_URL.*invalid port"):
        load_settings()
