"""Where a run's control group goes (raso.harness.tree_limits), on cgroup file trees laid out in a folder: the
kernel's files are plain files here, so this checks the choice, not the kernel."""

from __future__ import annotations

from pathlib import Path

from raso.harness.tree_limits import TreeLimitSupport, _probe_v1, _probe_v2, folder_bytes


def _group(folder: Path, controllers: str, enabled: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "cgroup.controllers").write_text(controllers + "\n")
    (folder / "cgroup.subtree_control").write_text(enabled + "\n")


def test_v2_uses_our_own_group_when_it_delegates_memory_and_pids(tmp_path):
    _group(tmp_path, "cpu memory pids", "cpu memory pids")
    _group(tmp_path / "svc", "cpu memory pids", "memory pids")
    found = _probe_v2({"": str(tmp_path)}, {"": "/svc"})
    assert found == TreeLimitSupport("cgroup-v2", (str(tmp_path / "svc"),))


def test_v2_falls_back_to_the_hierarchy_root_when_our_group_cannot_delegate(tmp_path):
    _group(tmp_path, "cpu memory pids", "cpu memory pids")
    _group(tmp_path / "user.slice" / "session.scope", "cpu", "")  # a scope: no memory controller to enable
    found = _probe_v2({"": str(tmp_path)}, {"": "/user.slice/session.scope"})
    assert isinstance(found, TreeLimitSupport) and found.parents == (str(tmp_path),)


def test_v2_without_the_controllers_anywhere_says_why(tmp_path):
    _group(tmp_path, "cpu", "cpu")
    found = _probe_v2({"": str(tmp_path)}, {"": "/"})
    assert isinstance(found, str) and "lacks the memory/pids controller" in found


def test_v1_needs_all_three_hierarchies(tmp_path):
    mounts = {c: str(tmp_path / c) for c in ("memory", "pids")}
    found = _probe_v1(mounts, {"memory": "/", "pids": "/"})
    assert found == "no cgroup v1 cpuacct hierarchy"


def test_folder_bytes_does_not_follow_links_and_gives_up_past_its_budget(tmp_path):
    (tmp_path / "a").write_bytes(b"x" * 100_000)
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "big").write_bytes(b"x" * 1_000_000)
    work = tmp_path / "work"
    work.mkdir()
    (work / "f").write_bytes(b"x" * 100_000)
    (work / "link").symlink_to(tmp_path / "outside")
    held = folder_bytes([str(work)])
    assert held is not None and 100_000 <= held < 1_000_000
    for i in range(20):
        (work / f"n{i}").touch()
    assert folder_bytes([str(work)], budget=10) is None
