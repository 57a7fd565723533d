"""Events of ``tessera.deep_ep``, shaped like DeepEP's ``EventOverlap`` / ``EventHandle``.

On the CPU an asynchronous operation has already sent its data when it returns; its event finishes
the receive side (waiting for peers, then unpacking or reducing into the returned arrays). Until the
event is waited on, the returned arrays are not filled and the inputs must stay alive (the event
keeps references to them). A later operation on the same buffer finishes pending ones first.
"""


class EventHandle:
    """A point in this rank's timeline (what ``capture()`` returns). CPU work is ordered already, so
    waiting on it returns at once."""

    def current_stream_wait(self) -> None:
        return None


class _NativeEvent:
    def __init__(self, native, keep_alive):
        self._native = native
        self._keep_alive = keep_alive

    def current_stream_wait(self) -> None:
        if self._native is not None:
            self._native.wait()
            self._native = None
            self._keep_alive = None


class EventOverlap:
    """DeepEP's ``EventOverlap``: ``current_stream_wait()`` finishes the operation; as a context
    manager the wait happens on exit (``with event(release_handle=True):`` as in DeepEP). Hooks
    registered with ``register_hook_after_wait`` run after the wait, in order. ``release_handle``
    drops the event and the inputs it keeps alive, as DeepEP releases its handle."""

    def __init__(self, event=None, extra_tensors=None):
        self.event = event
        self.extra_tensors = extra_tensors
        self._hooks = []
        self._release_on_exit = False

    def register_hook_after_wait(self, hook) -> None:
        self._hooks.append(hook)

    def current_stream_wait(self, release_handle: bool = False) -> None:
        if self.event is not None:
            self.event.current_stream_wait()
        hooks, self._hooks = self._hooks, []
        for hook in hooks:
            hook()
        if release_handle:
            self.event = None
            self.extra_tensors = None

    def __call__(self, release_handle: bool = False) -> "EventOverlap":
        self._release_on_exit = bool(release_handle)
        return self

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        release, self._release_on_exit = self._release_on_exit, False
        if exc_type is None:
            self.current_stream_wait(release_handle=release)


def overlap(native_event, is_async: bool, keep_alive) -> EventOverlap:
    """The EventOverlap of a native operation: pending work when asynchronous, else a finished one."""
    if is_async and native_event is not None and not native_event.done():
        return EventOverlap(_NativeEvent(native_event, keep_alive), keep_alive)
    return EventOverlap(None)
