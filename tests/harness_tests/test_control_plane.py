"""Where the control plane's binaries come from: $LADING_KUBE_ASSETS, else $KUBEBUILDER_ASSETS,
else shared/tools/kube unpacked into a cache keyed by the packed files; a directory that lacks
one of the three is refused naming the variable and what is missing."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import control_plane as cp


def assets(directory: Path, names: tuple[str, ...] = cp.BINARIES) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    for name in names:
        (directory / name).write_text("#!/bin/sh\n")
        (directory / name).chmod(0o755)
    return directory


def test_lading_kube_assets_wins_over_kubebuilder_assets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LADING_KUBE_ASSETS", str(assets(tmp_path / "ours")))
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets(tmp_path / "envtest")))
    assert cp.assets_dir() == tmp_path / "ours"
    monkeypatch.delenv("LADING_KUBE_ASSETS")
    assert cp.assets_dir() == tmp_path / "envtest"


def test_envtest_assets_without_the_controller_manager_are_refused_by_name(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LADING_KUBE_ASSETS", raising=False)
    monkeypatch.setenv("KUBEBUILDER_ASSETS", str(assets(tmp_path / "envtest", ("etcd", "kube-apiserver"))))
    with pytest.raises(FileNotFoundError) as exc:
        cp.assets_dir()
    assert "$KUBEBUILDER_ASSETS" in str(exc.value) and "kube-controller-manager" in str(exc.value)


def test_the_shared_tools_are_unpacked_once_into_a_cache_named_by_the_packed_files(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LADING_KUBE_ASSETS", raising=False)
    monkeypatch.delenv("KUBEBUILDER_ASSETS", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    key = cp.cache_key(cp.kube_tools())
    ready = assets(tmp_path / "lading" / f"kube-{key}")
    (ready / ".unpacked").touch()  # as a first session leaves it: nothing is unpacked again
    assert cp.assets_dir() == ready
    # another version of the packed files gets another directory
    other = tmp_path / "tools"
    other.mkdir()
    for name in cp.BINARIES:
        (other / f"{name}.xz").write_bytes(b"x" * 3)
        (other / f"{name}.size").write_text("3\n")
    assert cp.cache_key(other) != key
