"""The unload's side of the publish protocol (``lading_jobs.uploadset``): intent, complete, manifest, replace.

Objects under a destination, per ``ifExists`` (``token``: 8 hex digits of the run id):

============  ==========================  ==============================  ==========================
mode          files                       manifest (the commit point)     intent (while publishing)
============  ==========================  ==============================  ==========================
``error``     ``part-T-S.ext``            ``_lading_manifest.json``,      ``_lading_intent.json``
                                          created only if absent
``replace``   ``part-T-S-<token>.ext``    ``_lading_manifest.json``       ``_lading_intent.json``
``append``    ``part-T-S-<token>.ext``    ``_lading_manifest-<token>``    ``_lading_intent-<token>``
============  ==========================  ==============================  ==========================

``publish`` (one commit section: a SIGTERM waits for it) writes the intent with
create-if-absent, so under ``error`` and ``replace`` one run at a time publishes
to a destination; under ``error`` it then checks again that nothing but its
intent is there (two runs that both passed the early check cannot both
publish). It completes every upload, writes the manifest, and under ``replace``
only then deletes every object the new manifest does not list. New files never
take an existing object's name: ``error`` publishes into an empty prefix, the
others carry the run token. Any failure before the manifest undoes the
completed files; a failure after it leaves the intent so the run can finish.

``recover`` runs first in every run: an intent this run left (a killed
attempt) is rolled forward when its manifest was written (finish the
``replace`` deletes, drop the intent; the run is done) and back otherwise
(delete what it completed, abort what is pending, drop the intent). An intent
of *another* run is refused with a message naming it. A manifest of this run
that names a file no longer there (left by a release that undid a run whose
manifest had landed) is no commit: recovery removes it and what is left of its
files, and the run is done again.

An answer lost on the wire (a connection reset after the manifest's or an
upload's write landed) is decided by reading back: ``Storage.put_if_absent`` and
``complete_upload`` recognise their own write. A write whose outcome stays
undecided (``storage.undecided``) undoes nothing: the intent stays, the run fails
with ``PublishStateUnknown``, and a rerun of the same run id rolls forward or back.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from lading_jobs import critical, uploadset
from lading_jobs.storage import PendingUpload, Storage, StorageError, join, undecided
from lading_jobs.unload import naming


class DestinationNotEmpty(ValueError):
    pass


class DestinationBusy(RuntimeError):
    """Another run's intent is at the destination (publishing now, or killed while publishing)."""


class PublishStateUnknown(RuntimeError):
    """The manifest write failed ambiguously and could not be checked: the intent stays."""


def intent_name(mode: str, token: str | None) -> str:
    return "_lading_intent.json" if mode != "append" or token is None else f"_lading_intent-{token}.json"


def check_destination(storage: Storage, destination: str) -> None:
    """``ifExists: error``: fail, naming the prefix and one key, if anything is there."""
    first = next(iter(storage.list_objects(destination)), None)
    if first is not None:
        if first.uri.rsplit("/", 1)[-1].startswith("_lading_intent"):
            raise DestinationBusy(_busy_message(destination, first.uri, None))
        raise DestinationNotEmpty(
            f"to.files: the destination {destination} is not empty (found {first.uri}); "
            "set to.ifExists to replace or append, or choose an empty prefix "
            "(e.g. add {run_time:%Y%m%dT%H%M%SZ} to it)")


def _busy_message(destination: str, intent_uri: str, run_id: str | None) -> str:
    who = f"run {run_id}" if run_id else "another run"
    return (f"to.files: {who} is publishing to {destination}, or was killed while publishing (its intent "
            f"{intent_uri} is there). Wait for it, or rerun {who} (the same runId) to finish or undo it; "
            f"if that run will never run again, delete {intent_uri} and the files it lists")


def read_manifest(storage: Storage, uri: str) -> dict[str, Any] | None:
    if storage.head(uri) is None:
        return None
    try:
        return json.loads(storage.read(uri))  # type: ignore[no-any-return]
    except StorageError:
        return None if storage.head(uri) is None else _raise_again(uri)


def _raise_again(uri: str) -> dict[str, Any]:
    raise StorageError(f"reading the manifest {uri} failed; check the destination")


def recover(storage: Storage, destination: str, mode: str, run_id: str, token: str | None) -> dict[str, Any] | None:
    """Finish or undo what an earlier attempt of ``run_id`` left; its manifest if it had committed."""
    manifest_uri = join(destination, naming.manifest_name(token if mode == "append" else None))
    us = uploadset.UploadSet(storage, join(destination, intent_name(mode, token)), run_id, roots=(destination,))
    intent = us.read_intent()
    manifest = read_manifest(storage, manifest_uri)
    ours = manifest is not None and manifest.get("runId") == run_id
    if ours and intent is None:
        assert manifest is not None
        if not _whole(storage, destination, manifest_uri, manifest):
            return None
    if intent is None:
        return manifest if ours else None
    if intent.run_id != run_id:
        raise DestinationBusy(_busy_message(destination, us.intent_uri, intent.run_id))
    with critical.commit_section():
        if ours:
            assert manifest is not None
            if mode == "replace":
                delete_replaced(storage, destination, manifest, us.intent_uri)
            us.finish()  # rolled forward: the intent goes (a retried delete only while it is still this one)
            return manifest
        us.roll_back(intent)
    return None


def _whole(storage: Storage, destination: str, manifest_uri: str, manifest: dict[str, Any]) -> bool:
    """Whether every file this run's committed manifest lists is there. If not (an earlier release
    undid the run after its manifest had landed), the manifest commits nothing: it and what is left
    of its files (all this run's) are removed, so the run is done again."""
    listed = [join(destination, f["path"]) for f in manifest["files"]]
    present = {o.uri for o in storage.list_objects(destination)}
    if all(uri in present for uri in listed):
        return True
    with critical.commit_section():
        storage.delete([uri for uri in listed if uri in present])
        storage.delete([manifest_uri])  # last: until it goes, a rerun finds this manifest again
    return False


def delete_replaced(storage: Storage, destination: str, manifest: dict[str, Any], intent_uri: str) -> None:
    """``replace`` after its manifest: delete every object the manifest does not list."""
    keep = {join(destination, f["path"]) for f in manifest["files"]}
    keep |= {join(destination, naming.MANIFEST_NAME), intent_uri}
    stale = [o.uri for o in storage.list_objects(destination) if o.uri not in keep]
    if stale:
        storage.delete(stale)


def publish(storage: Storage, destination: str, files: list[dict[str, Any]], manifest: dict[str, Any], *,
            mode: str, run_id: str, token: str | None) -> str:
    """Intent → complete every upload → manifest → (replace) delete the old → drop the intent."""
    manifest_uri = join(destination, naming.manifest_name(token if mode == "append" else None))
    us = uploadset.UploadSet(storage, join(destination, intent_name(mode, token)), run_id, roots=(destination,))
    uploads = [PendingUpload.from_dict(f["upload"]) for f in files]
    body = json.dumps(manifest, indent=1, sort_keys=False).encode()
    with critical.commit_section():
        try:
            us.begin(uploads, {"manifest": manifest_uri, "mode": mode}, exclusive=True, owned=mode != "error")
        except uploadset.IntentHeld as e:
            held = e.intent.run_id if e.intent is not None else None
            uploadset.abort_pending(storage, uploads)
            raise DestinationBusy(_busy_message(destination, us.intent_uri, held)) from e
        except BaseException:  # nothing completed: aborting is safe even if the intent landed
            uploadset.abort_pending(storage, uploads)
            raise
        try:
            if mode == "error":  # untokened names: ours only once the prefix is known to be empty
                _still_empty(storage, destination, us.intent_uri)
                us.own()
            us.complete_all()
        except BaseException as e:
            if undecided(e):  # a completion may still land: undo nothing, keep the intent for the rerun
                raise PublishStateUnknown(
                    f"completing this run's files under {destination} failed without a clear answer ({e}); the "
                    f"intent {us.intent_uri} stays: rerun {run_id} (the same runId) to finish or undo it") from e
            us.abort_all()
            raise
        _write_manifest(storage, us, manifest_uri, body, mode, run_id)
        if mode == "replace":
            delete_replaced(storage, destination, manifest, us.intent_uri)
        us.finish()
    return manifest_uri


def _still_empty(storage: Storage, destination: str, intent_uri: str) -> None:
    for o in storage.list_objects(destination):
        if o.uri != intent_uri:
            raise DestinationNotEmpty(
                f"to.files: the destination {destination} is not empty (found {o.uri}, written while this run "
                "worked); set to.ifExists to replace or append, or choose an empty prefix")


def _write_manifest(storage: Storage, us: uploadset.UploadSet, uri: str, body: bytes, mode: str,
                    run_id: str) -> None:
    """The commit point. Before it lands the run can be undone; an ambiguous failure is checked."""
    try:
        if mode == "error":
            if not storage.put_if_absent(uri, body):
                raise DestinationNotEmpty(f"to.files: another run wrote {uri} while this run published; "
                                          "nothing of this run was kept")
        else:
            storage.put(uri, body)
        return
    except DestinationNotEmpty:
        us.abort_all()  # put_if_absent read another run's manifest there: ours never landed
        raise
    except BaseException as e:
        try:
            landed = read_manifest(storage, uri)
        except Exception as check:  # noqa: BLE001 - cannot tell: keep the intent for the rerun
            raise PublishStateUnknown(
                f"writing the manifest {uri} failed ({e}) and it cannot be read back ({check}); the intent "
                f"{us.intent_uri} stays: rerun {run_id} (the same runId) to finish or undo the run") from e
        if landed is not None and landed.get("runId") == run_id:
            return  # it landed: the run is committed
        if undecided(e):  # not there yet, but a lost attempt may still land: undo nothing
            raise PublishStateUnknown(
                f"writing the manifest {uri} failed without a clear answer ({e}) and it is not there yet; the "
                f"intent {us.intent_uri} stays: rerun {run_id} (the same runId) to finish or undo the run") from e
        us.abort_all()
        raise


def _is_ours(upload: PendingUpload, destination: str, token: str | None, partition_by: tuple[str, ...]) -> bool:
    """Whether a pending upload under ``destination`` is one this run's tasks may have begun: a part
    file with the run's naming, directly under the destination or under one Hive directory per
    ``partition_by`` column, in order. Another job's destination can sit below this one
    (``s3://b/exports/eu/`` under ``s3://b/exports/``), and without a token (``ifExists: error``)
    its parts are named as this run's: its pending uploads are not this run's to abort."""
    if not naming.is_part_of_run(upload.uri, token) or not upload.uri.startswith(destination):
        return False
    directories = upload.uri[len(destination):].split("/")[:-1]
    return len(directories) == len(partition_by) and all(
        d.startswith(naming.escape_path_name(c) + "=") for d, c in zip(directories, partition_by, strict=True))


def sweep(storage: Storage, destination: str, token: str | None, partition_by: tuple[str, ...],
          keep: Iterable[str] = ()) -> int:
    """Abort pending uploads under ``destination`` with this run's naming and layout, except the
    upload ids in ``keep``; return how many."""
    return uploadset.sweep(storage, destination, lambda u: _is_ours(u, destination, token, partition_by), keep)


def abort_run(storage: Storage, destination: str, files: list[dict[str, Any]], token: str | None,
              partition_by: tuple[str, ...]) -> None:
    """Abort every upload the driver knows of, then sweep the run's naming (call once Spark
    reports the run's tasks ended, so no killed task is still starting one)."""
    uploadset.parallel(lambda f: storage.abort_upload(PendingUpload.from_dict(f["upload"])), files)
    sweep(storage, destination, token, partition_by)
