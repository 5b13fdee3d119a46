"""``daemon.etcdgateway``: ``[etcd]`` options, and the gateway against a real etcd."""

from __future__ import annotations

import asyncio

import pytest

from reconciler import errors, redaction, settings
from reconciler.daemon import etcdgateway as gw
from tests.conftest import Repo
from tests.daemon.etcdserver import Etcd, etcd_server  # noqa: F401 (fixture)


def options(repo: Repo, body: str, **environ: str) -> gw.Options | None:
    repo.write("monitors.toml", body)
    return gw.Options.load(settings.load(root=repo.root), environ=environ,
                           redactor=redaction.Redactor())


def test_options_defaults_and_secrets(repo: Repo) -> None:
    assert options(repo, "") is None
    got = options(repo, '[etcd]\nendpoints = ["http://e:2379/"]\nprefix = "/x"\n'
                  'username = "u"\npassword = "${PW}"\n', PW="s3cret")
    assert got == gw.Options(endpoints=("http://e:2379",), prefix="/x/", ttl=10.0,
                             username="u", password="s3cret")
    assert "s3cret" not in repr(got)


@pytest.mark.parametrize(("body", "message"), [
    ('ttl = "1s"', "etcd.ttl: 1s is under the 2s a lease needs"),
    ('certFile = "c.pem"', "certFile and keyFile go together"),
    ('password = "${NOPE}"', "environment variable NOPE is not set"),
])
def test_options_errors_are_one_line(repo: Repo, body: str, message: str) -> None:
    with pytest.raises(errors.ConfigError, match=message):
        options(repo, f'[etcd]\nendpoints = ["http://e:2379"]\n{body}\n')


def test_lease_and_create_if_absent_against_etcd(etcd_server: Etcd) -> None:  # noqa: F811
    async def run() -> None:
        g = gw.Gateway(gw.Options(endpoints=("http://127.0.0.1:1", etcd_server.url)))
        lease = await g.grant(5)
        assert await g.keepalive(lease) == 5
        first = await g.txn([gw.compare_created("/k", 0)], [gw.put("/k", "a", lease=lease)],
                            [gw.get("/k")])
        second = await g.txn([gw.compare_created("/k", 0)], [gw.put("/k", "b", lease=lease)],
                             [gw.get("/k")])
        assert first.succeeded and not second.succeeded
        assert second.ranges[0][0] == gw.KeyValue("/k", "a", first.revision, lease)
        await g.revoke(lease)
        assert await g.keepalive(lease) == 0
        gone = await g.txn([gw.compare_created("/k", first.revision)], [], [gw.get("/k")])
        assert not gone.succeeded and gone.ranges == ((),)
        with pytest.raises(gw.EtcdError) as lost:
            await g.txn([], [gw.put("/k", "c", lease=lease)])
        assert lost.value.lease_lost
        await g.aclose()
        down = gw.Gateway(gw.Options(endpoints=("http://127.0.0.1:1",)))
        with pytest.raises(gw.EtcdError, match="etcd unreachable"):
            await down.grant(5)
        await down.aclose()

    asyncio.run(run())
