"""The Kubernetes layout: /var/log/containers/<pod>.log is a symlink into /var/log/pods/...; when
the container restarts the link's target is swapped. The link is followed, the swap is a rotation:
the old target is drained, the new one read from 0."""

from __future__ import annotations

import os

from tail_support import Harness, append, decode_block


def swap_link(link, target):
    tmp = link.with_name(link.name + ".tmp")
    os.symlink(target, tmp)
    os.replace(tmp, link)  # atomic, as the kubelet does


def test_symlink_target_swap(tmp_path):
    pods = tmp_path / "pods"
    (pods / "a").mkdir(parents=True)
    (pods / "b").mkdir()
    containers = tmp_path / "containers"
    containers.mkdir()
    link = containers / "sglang_default_server.log"
    old, new = pods / "a" / "0.log", pods / "b" / "0.log"
    old.write_bytes(b"")
    swap_link(link, old)
    with Harness(link, rotate_wait=60, poll_interval=60) as h:  # no timer: writes in pods/ must wake it
        append(old, decode_block(15))
        h.wait(lambda: h.lines() == 15, "lines written through the link's target (file events)", deadline=10)
        assert h.follower.mode == "inotify"
        append(old, decode_block(2))
        new.write_bytes(b"")
        swap_link(link, new)
        append(new, decode_block(6))
        h.wait(lambda: h.stats(link).rotations == 1, "the swap to be seen")
        append(old, decode_block(3))  # the old container's last words: its directory is still watched
        h.wait(lambda: h.lines() == 26, "lines in the old target during the grace period (file events)", deadline=10)
        h.wait_decode(15 + 2 + 6 + 3)
        assert h.stats(link).opens == 2
        assert h.metric("sglang_exporter_log_file_present", path=str(link)) == 1


def test_dangling_symlink_waits(tmp_path):
    target = tmp_path / "pods" / "0.log"
    link = tmp_path / "server.log"
    os.symlink(target, link)
    with Harness(link) as h:
        h.settle()
        assert h.metric("sglang_exporter_log_file_present", path=str(link)) == 0
        target.parent.mkdir()
        append(target, decode_block(8))
        h.wait_decode(8, "once the link's target exists")
