"""A real OpenLDAP server (Debian's slapd) on loopback for the LDAP sign-in tests, started once
per module in a folder of its own: an mdb database under dc=example,dc=org, people under
ou=people, groupOfNames groups under ou=groups, a service account pmd binds as."""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.servers import free_port, stop

SLAPD = "/usr/sbin/slapd"
BASE = "dc=example,dc=org"
ROOT_DN = f"cn=admin,{BASE}"
ROOT_PASSWORD = "slapd-root-secret"
SERVICE_DN = f"cn=pmd,{BASE}"
SERVICE_PASSWORD = "pmd-service-secret"


@dataclass
class Directory:
    url: str
    process: subprocess.Popen

    def connect(self):
        import ldap

        conn = ldap.initialize(self.url)
        conn.simple_bind_s(ROOT_DN, ROOT_PASSWORD)
        return conn

    def person(self, uid: str, password: str, *, groups: list[str]) -> None:
        """Add someone (or set their groups): uid under ou=people, member of exactly `groups`."""
        import ldap
        import ldap.modlist

        conn = self.connect()
        dn = f"uid={uid},ou=people,{BASE}"
        try:
            conn.add_s(
                dn,
                ldap.modlist.addModlist(
                    {
                        "objectClass": [b"inetOrgPerson"],
                        "uid": [uid.encode()],
                        "cn": [uid.encode()],
                        "sn": [uid.encode()],
                        "mail": [f"{uid}@example.org".encode()],
                        "userPassword": [password.encode()],
                    }
                ),
            )
        except ldap.ALREADY_EXISTS:
            pass
        for group_dn, attrs in conn.search_s(f"ou=groups,{BASE}", ldap.SCOPE_ONELEVEL, "(objectClass=groupOfNames)"):
            name = attrs["cn"][0].decode()
            members = attrs["member"]
            if name in groups and dn.encode() not in members:
                conn.modify_s(group_dn, [(ldap.MOD_ADD, "member", [dn.encode()])])
            elif name not in groups and dn.encode() in members:
                conn.modify_s(group_dn, [(ldap.MOD_DELETE, "member", [dn.encode()])])
        for name in set(groups) - {
            a["cn"][0].decode()
            for _, a in conn.search_s(f"ou=groups,{BASE}", ldap.SCOPE_ONELEVEL, "(objectClass=groupOfNames)")
        }:
            conn.add_s(
                f"cn={name},ou=groups,{BASE}",
                ldap.modlist.addModlist(
                    {
                        "objectClass": [b"groupOfNames"],
                        "cn": [name.encode()],
                        "member": [SERVICE_DN.encode(), dn.encode()],
                    }
                ),
            )  # never empty: groupOfNames needs a member
        conn.unbind_s()

    def settings(self) -> dict:
        """pmd's AUTH_LDAP_* settings for this directory (what PMD_LDAP_* become)."""
        import ldap
        from django_auth_ldap.config import GroupOfNamesType, LDAPSearch

        return {
            "AUTH_LDAP_SERVER_URI": self.url,
            "AUTH_LDAP_BIND_DN": SERVICE_DN,
            "AUTH_LDAP_BIND_PASSWORD": SERVICE_PASSWORD,
            "AUTH_LDAP_USER_SEARCH": LDAPSearch(f"ou=people,{BASE}", ldap.SCOPE_SUBTREE, "(uid=%(user)s)"),
            "AUTH_LDAP_GROUP_SEARCH": LDAPSearch(f"ou=groups,{BASE}", ldap.SCOPE_SUBTREE, "(objectClass=groupOfNames)"),
            "AUTH_LDAP_GROUP_TYPE": GroupOfNamesType(name_attr="cn"),
        }


def start_directory(folder: Path) -> Directory:
    try:
        import ldap
        import ldap.modlist
    except ImportError:
        pytest.skip("python-ldap is not installed (the ldap extra: ./scripts/bootstrap local,dev,ldap)")
    if not Path(SLAPD).exists() or shutil.which("slappasswd") is None:
        pytest.skip("Debian's slapd is not installed (apt-get install slapd ldap-utils)")
    (folder / "db").mkdir()
    port = free_port()
    root_hash = subprocess.run(
        ["slappasswd", "-s", ROOT_PASSWORD], capture_output=True, text=True, check=True
    ).stdout.strip()
    (folder / "slapd.conf").write_text(f"""
include /etc/ldap/schema/core.schema
include /etc/ldap/schema/cosine.schema
include /etc/ldap/schema/inetorgperson.schema
modulepath /usr/lib/ldap
moduleload back_mdb
pidfile {folder}/slapd.pid
database mdb
maxsize 10485760
suffix "{BASE}"
rootdn "{ROOT_DN}"
rootpw {root_hash}
directory {folder}/db
access to attrs=userPassword by self write by anonymous auth by * none
access to * by * read
""")
    url = f"ldap://127.0.0.1:{port}"
    process = subprocess.Popen(
        [SLAPD, "-d", "0", "-h", url + "/", "-f", str(folder / "slapd.conf")],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    directory = Directory(url=url, process=process)
    import ldap
    import ldap.modlist

    deadline = time.monotonic() + 20
    while True:
        try:
            conn = directory.connect()
            break
        except ldap.SERVER_DOWN:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError(f"slapd did not start: {process.stdout.read()}") from None
            time.sleep(0.1)
    service_hash = subprocess.run(
        ["slappasswd", "-s", SERVICE_PASSWORD], capture_output=True, text=True, check=True
    ).stdout.strip()
    for dn, attrs in [
        (BASE, {"objectClass": [b"dcObject", b"organization"], "dc": [b"example"], "o": [b"Example"]}),
        (f"ou=people,{BASE}", {"objectClass": [b"organizationalUnit"], "ou": [b"people"]}),
        (f"ou=groups,{BASE}", {"objectClass": [b"organizationalUnit"], "ou": [b"groups"]}),
        (
            SERVICE_DN,
            {
                "objectClass": [b"organizationalRole", b"simpleSecurityObject"],
                "cn": [b"pmd"],
                "userPassword": [service_hash.encode()],
            },
        ),
    ]:
        conn.add_s(dn, ldap.modlist.addModlist(attrs))
    conn.unbind_s()
    return directory


def stop_directory(directory: Directory) -> None:
    stop(directory.process)
