"""Reflector: list + watch of one resource (kube/, first stage of the flow).

    API server ──LIST (paginated)──► diff against what is known ──► listener
               ──WATCH from the list's resourceVersion, with bookmarks ──► listener

The names are client-go's (``tools/cache``). What it guarantees to its
listener (the watch/ engine):

* On a cold start every existing object arrives as ADDED, then ``on_synced``.
* Started with a stored position (``resource_version`` + ``known``), it
  resumes the watch without replaying anything.
* After a disconnect the watch resumes from the last resourceVersion seen
  (events or bookmarks), so nothing is lost and nothing repeats.
* On 410 Gone it relists and diffs against the objects it knows: changed
  objects become MODIFIED, vanished ones DELETED (with ``relisted=True`` and
  only the metadata it remembered), unchanged ones are not repeated.
* ``resync()`` (a consumer lost what it was given, e.g. it crashed and was
  restarted) ends the watch and relists delivering *every* object, changed or
  not, and the vanished ones as DELETED; then it watches on.
* A stream that ends, breaks or stays silent for ``inactivity_timeout`` (no
  event, no bookmark: an idle resource gets no bookmarks from a 1.20 API
  server) after the server had answered is not a failure: it is reopened at
  once from the last resourceVersion and the watch stays synced and ready.
  Each watch asks the server to end it after a random 5-10 minutes.
* Failures (no answer, an error Status, a bad frame) back off 0.8 s → 30 s
  with jitter, as client-go's reflector does; the backoff starts again from
  the bottom once a watch is open again. 429 Retry-After is honoured.
* Only an outage that lasts (``not_ready_after``, NOT_READY_AFTER by default)
  makes the watch ``stale()`` (not ready); the log line says why.

It remembers only (uid, resourceVersion) per object, not the objects
themselves, so its memory grows slowly with the cluster.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import httpx2 as httpx
import msgspec

from .. import metrics
from .backoff import Backoff
from .client import KubeClient
from .errors import ApiError, Gone, TooManyRequests, describe
from .projection import Projection
from .resources import Resource
from .uids import compact_uid

log = logging.getLogger(__name__)
_decode = msgspec.json.decode

# How long a watch may be without an open stream (failing to reconnect, or relisting) before it counts
# as not ready. Longer than an API server restart plus a few backoff steps (0.8 + 1.6 + 3.2 + 6.4 s),
# so routine blips do not flap a readiness probe; short enough that a real outage shows within a minute.
NOT_READY_AFTER = 30.0
# What breaking or going quiet an open stream does: reopened at once, no backoff (nothing is wrong with
# the server: it answered). ReadTimeout is the inactivity timeout, the others a connection cut mid-stream.
_STREAM_ENDED = (httpx.ReadTimeout, httpx.RemoteProtocolError, httpx.ReadError)


_RV_BITS = 64  # a resourceVersion that is an etcd revision fits; a larger one is kept as given


def _pack(uid: str, resource_version: str) -> int | tuple[str, str]:
    """A canonical UUID and a decimal revision as one int (uid bits above the revision's), else the two strings."""
    try:
        packed = (int(uid.replace("-", ""), 16) << _RV_BITS) | int(resource_version)
    except ValueError:
        return (uid, resource_version)
    if int(resource_version) >> _RV_BITS or _unpack(packed) != (uid, resource_version):
        return (uid, resource_version)  # not exactly what it gives back (case, signs, spaces, zeros, size)
    return packed


def _unpack(packed: int | tuple[str, str]) -> tuple[str, str]:
    if isinstance(packed, tuple):
        return packed
    digits = f"{packed >> _RV_BITS:032x}"
    uid = f"{digits[:8]}-{digits[8:12]}-{digits[12:16]}-{digits[16:20]}-{digits[20:]}"
    return uid, str(packed & ((1 << _RV_BITS) - 1))


class ObjectVersion:
    """What the reflector remembers of an object: enough to diff a relist.

    One is kept per object for as long as it exists, so it is packed: a UUID and an etcd revision (what every
    API server we know gives) as one int of about 56 bytes instead of two strings of about 130 and their
    record; anything else stays the two strings. Equal when uid and
    resourceVersion are.
    """

    __slots__ = ("_packed",)

    def __init__(self, uid: str, resource_version: str) -> None:
        self._packed = _pack(uid, resource_version)

    @property
    def uid(self) -> str:
        return _unpack(self._packed)[0]

    @property
    def resource_version(self) -> str:
        return _unpack(self._packed)[1]

    @property
    def uid_key(self) -> int | str:
        """The uid as uids.compact_uid gives it (no string made for a packed one): what garbage collection
        compares, for every object of the cluster at once."""
        packed = self._packed
        return packed >> _RV_BITS if isinstance(packed, int) else compact_uid(packed[0])

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ObjectVersion) and self._packed == other._packed

    def __hash__(self) -> int:
        return hash(self._packed)

    def __repr__(self) -> str:
        return f"ObjectVersion(uid={self.uid!r}, resource_version={self.resource_version!r})"


@dataclass(slots=True)
class WatchEvent:
    """One change of one object, as the engine hands it to translate()."""

    type: str  # ADDED | MODIFIED | DELETED
    object: dict[str, Any]
    # True when a relist diff synthesized this event; a relisted DELETED
    # carries only the metadata the reflector remembered (name, namespace, uid).
    relisted: bool = False
    received: float = field(default_factory=time.time)
    # The reflector's own key string for the object: the informer's store and the queues keep this one
    # string rather than an equal copy each (one per object per holder, for as long as the object exists).
    known_key: str | None = field(default=None, repr=False, compare=False)

    @property
    def key(self) -> str:
        return self.known_key if self.known_key is not None else object_key(self.object)


class ReflectorListener(Protocol):
    def on_event(self, event: WatchEvent) -> None: ...
    def on_bookmark(self, resource_version: str) -> None: ...
    def on_synced(self) -> None: ...
    async def wait_for_room(self) -> None:
        """Return when the listener can take more; the reflector reads nothing meanwhile (backpressure)."""


@dataclass
class ReflectorOptions:
    # Objects a LIST page asks for. A page is the cold start's largest transient: its body and its decoded
    # objects, for each informer listing at once. 250 rather than client-go's 500 kept the 10,000-pod cold
    # start's peak RSS lower (docs/benchmarks.md); the page count it doubles is 40 requests there.
    page_size: int = 250
    # Silence on an open stream after which it is reopened (the server's bookmarks are not to be relied on).
    inactivity_timeout: float = 70.0
    watch_timeout: tuple[float, float] = (300.0, 600.0)
    backoff_initial: float = 0.8
    backoff_max: float = 30.0
    connect_timeout: float = 10.0
    list_timeout: float = 60.0
    # An outage longer than this makes the watch not ready (stale()).
    not_ready_after: float = NOT_READY_AFTER


def object_key(obj: dict[str, Any]) -> str:
    meta = obj["metadata"]
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else meta["name"]


class Reflector:
    """Keeps one listener told of every change to one resource."""

    def __init__(
        self,
        client: KubeClient,
        resource: Resource,
        listener: ReflectorListener,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        resource_version: str | None = None,
        known: dict[str, ObjectVersion] | None = None,
        known_complete: bool = False,
        options: ReflectorOptions | None = None,
        projection: Projection | None = None,
    ) -> None:
        self.client = client
        self.resource = resource
        self.listener = listener
        self.namespace = namespace
        self.selectors = {"labelSelector": label_selector, "fieldSelector": field_selector}
        self.resource_version = resource_version
        self.known: dict[str, ObjectVersion] = dict(known or {})
        # Whether ``known`` is every object (after a LIST, or resumed with a complete record of them).
        self.knows_all = known_complete
        self.options = options or ReflectorOptions()
        # Objects are decoded straight into the fields consumers declared (whole objects by default).
        self.projection = projection or Projection(None)
        self.synced = False
        self.connected = False
        # Progress of the current (or last) LIST: objects received, and how many
        # the server said there are (remainingItemCount; None when it does not say).
        self.listed = 0
        self.expected: int | None = None
        self.last_activity = time.monotonic()
        self.disconnected_since = self.last_activity
        self._backoff = Backoff(self.options.backoff_initial, self.options.backoff_max)
        self._label = resource.name
        self._resync = False
        self._watching: asyncio.Task[None] | None = None

    @property
    def path(self) -> str:
        return self.resource.path(self.namespace)

    def stale(self, now: float | None = None) -> bool:
        """Without an open stream for longer than ``not_ready_after`` (a routine reconnect takes milliseconds).

        A connected stream cannot be silently dead for long: the read timeout
        (the inactivity timeout) ends it, and a reconnect to a dead server fails.
        """
        if self.connected:
            return False
        now = time.monotonic() if now is None else now
        return now - self.disconnected_since > self.options.not_ready_after

    async def run(self) -> None:
        """List and watch until cancelled; every failure is retried, never raised."""
        while True:
            try:
                if self.resource_version is None or self._resync:
                    await self._relist(everything=self._resync)
                    self._resync = False
                await self._watch_until_resync()
            except Gone:
                metrics.WATCH_GONE.labels(self._label).inc()
                log.info("%s: resourceVersion %s is gone, relisting", self._label, self.resource_version)
                self.resource_version = None
            except TooManyRequests as error:
                delay = error.retry_after if error.retry_after is not None else self._backoff.next()
                await self._failed(error, delay)
            except (ApiError, httpx.HTTPError, OSError, msgspec.DecodeError) as error:
                await self._failed(error, self._backoff.next())

    def resync(self) -> None:
        """Deliver every object again, as a relist does, then watch on (the listener lost state)."""
        self._resync = True
        if self._watching is not None:
            self._watching.cancel()

    async def _watch_until_resync(self) -> None:
        self._watching = asyncio.ensure_future(self._watch())
        try:
            await self._watching
        except asyncio.CancelledError:
            current = asyncio.current_task()
            if not self._resync or (current is not None and current.cancelling()):
                raise  # cancelled from outside, not by resync()
            self._disconnected()
        finally:
            self._watching = None

    def _disconnected(self) -> None:
        if self.connected:
            self.connected = False
            self.disconnected_since = time.monotonic()

    def _opened(self) -> None:
        """The server answered a WATCH: connected, and the backoff starts again from the bottom."""
        now = time.monotonic()
        if not self.connected and now - self.disconnected_since > self.options.not_ready_after:
            log.warning("%s: watching again after %.0fs", self._label, now - self.disconnected_since)
        self.connected = True
        self.last_activity = now
        self._backoff.reset()

    async def _failed(self, error: Exception, delay: float) -> None:
        """Log a failure (a warning once the outage makes the watch not ready), then wait ``delay``."""
        self._disconnected()
        down = time.monotonic() - self.disconnected_since
        cause = "throttled by the API server" if isinstance(error, TooManyRequests) else describe(error)
        if down + delay > self.options.not_ready_after:
            log.warning("%s: not ready, no watch for %.0fs: %s; retrying in %.1fs", self._label, down, cause, delay)
        else:
            log.info("%s: %s; retrying in %.1fs", self._label, cause, delay)
        metrics.WATCH_RECONNECTS.labels(self._label).inc()
        await asyncio.sleep(delay)

    async def _relist(self, everything: bool = False) -> None:
        """Paginated LIST, diffed against what is known (``everything``: unchanged objects too), page by page."""
        metrics.RELISTS.labels(self._label).inc()
        self.listed, self.expected = 0, None
        seen: set[str] = set()
        params: dict[str, Any] = {"limit": self.options.page_size, **self.selectors}
        timeout = httpx.Timeout(self.options.list_timeout, connect=self.options.connect_timeout)
        while True:
            page = await self.client.request(
                "GET", self.path, params=params, timeout=timeout, decoder=self.projection.page
            )
            self.last_activity = time.monotonic()
            meta = page.get("metadata") or {}
            self._count_listed(len(page.get("items") or ()), meta)
            for obj in page.get("items") or ():
                obj.setdefault("apiVersion", self.resource.api_version)
                obj.setdefault("kind", self.resource.kind)
                self._diff_one(obj, seen, everything)
            page.pop("items", None)  # the listener holds what it still needs; let the page go before waiting
            await self.listener.wait_for_room()
            if not meta.get("continue"):
                break
            params["continue"] = meta["continue"]
        for key in [key for key in self.known if key not in seen]:
            self._deliver_vanished(key, self.known.pop(key))
        self.resource_version = meta["resourceVersion"]
        self.knows_all = True
        # The list's resourceVersion is the only safe resume point after a
        # relist: the listener treats it like a bookmark.
        self.listener.on_bookmark(self.resource_version)
        if not self.synced:
            self._mark_synced()

    def _count_listed(self, count: int, meta: dict[str, Any]) -> None:
        self.listed += count
        if not meta.get("continue"):
            self.expected = self.listed
        elif meta.get("remainingItemCount") is not None:
            self.expected = self.listed + meta["remainingItemCount"]

    def _diff_one(self, obj: dict[str, Any], seen: set[str], everything: bool) -> None:
        meta = obj["metadata"]
        key = object_key(obj)
        seen.add(key)
        current = ObjectVersion(meta["uid"], meta["resourceVersion"])
        previous = self.known.get(key)
        self.known[key] = current
        if previous is None:
            self._deliver(WatchEvent("ADDED", obj, relisted=True, known_key=key))
        elif previous.uid != current.uid:
            # Deleted and recreated under the same name while we were away.
            self._deliver_vanished(key, previous)
            self._deliver(WatchEvent("ADDED", obj, relisted=True, known_key=key))
        elif everything or previous.resource_version != current.resource_version:
            self._deliver(WatchEvent("MODIFIED", obj, relisted=True, known_key=key))

    def _deliver_vanished(self, key: str, version: ObjectVersion) -> None:
        namespace, _, name = key.rpartition("/")
        meta = {"name": name, "uid": version.uid, "resourceVersion": version.resource_version}
        if namespace:
            meta["namespace"] = namespace
        stub = {"apiVersion": self.resource.api_version, "kind": self.resource.kind, "metadata": meta}
        self._deliver(WatchEvent("DELETED", stub, relisted=True, known_key=key))

    def _deliver(self, event: WatchEvent) -> None:
        metrics.WATCH_EVENTS.labels(self._label, event.type).inc()
        self.listener.on_event(event)

    def _mark_synced(self) -> None:
        self.synced = True
        self.listener.on_synced()

    async def _watch(self) -> None:
        """One WATCH request from ``resource_version``; returns when the server ends it."""
        low, high = self.options.watch_timeout
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": int(random.uniform(low, high)),
            **self.selectors,
        }
        # The read timeout is the inactivity timeout: a socket that looks open may hide a dead server, and
        # an idle resource may get no bookmarks at all (1.20), so silence reopens the stream: a live server
        # answers at once (no outage, no backoff), a dead one fails the reconnect.
        timeout = httpx.Timeout(
            self.options.connect_timeout,
            read=self.options.inactivity_timeout,
            connect=self.options.connect_timeout,
        )
        async with self.client.stream(self.path, params, timeout) as response:
            self._opened()
            if not self.synced:
                self._mark_synced()  # resumed from a stored position: nothing to list
            try:
                await self._read(response)
            except _STREAM_ENDED as ended:
                # Quiet (an idle resource) or cut: the server had answered, so reopen at once from
                # resource_version; a server that is really gone fails that reconnect instead.
                log.debug(
                    "%s: watch stream ended (%s), reopening at %s", self._label, describe(ended), self.resource_version
                )
        self._disconnected()

    async def _read(self, response: httpx.Response) -> None:
        buffer = b""
        async for chunk in response.aiter_bytes():
            *lines, buffer = (buffer + chunk).split(b"\n")
            for line in lines:
                if line:
                    self._handle_line(line)
            await self.listener.wait_for_room()
            self.last_activity = time.monotonic()

    def _handle_line(self, line: bytes) -> None:
        try:
            frame = self.projection.frame.decode(line)
        except msgspec.ValidationError:
            frame = _decode(line)  # not shaped like the resource: an ERROR frame's Status
        kind = frame["type"]
        obj = frame["object"]
        if kind == "ERROR":
            # A Status whose fields the projection may have dropped: read it whole.
            raise ApiError.from_status(_decode(line)["object"])
        rv = obj["metadata"]["resourceVersion"]
        if kind == "BOOKMARK":
            self.resource_version = rv
            self.listener.on_bookmark(rv)
            return
        key = object_key(obj)
        if kind == "DELETED":
            self.known.pop(key, None)
        else:
            self.known[key] = ObjectVersion(obj["metadata"]["uid"], rv)
        self.resource_version = rv
        self._deliver(WatchEvent(kind, obj, known_key=key))
