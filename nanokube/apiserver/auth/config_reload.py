"""What the authentication and authorization config controllers share: the file read every
RELOAD_PERIOD seconds and, once its text changes, judged once (upstream's WatchUntil with its
tracked data): a text that builds replaces what the server runs, one that does not is logged and
counted (as a failure, like a file that cannot be read), and the last good one stays."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from ...clock import Clock

log = logging.getLogger(__name__)

#: how often the file is read for changes (upstream also watches it with fsnotify, so a change lands at once)
RELOAD_PERIOD = 1.0


def read_text(path: str) -> str:
    """A config file's text; bytes that are not UTF-8 kept as lone surrogates, which the YAML decoder
    refuses (go-yaml's "invalid leading UTF-8 octet"), so that a bad file is a bad config, not a crash."""
    return Path(path).read_bytes().decode("utf-8", "surrogateescape")


class ReloadedConfig:
    """A subclass builds from a text (`build`, ValueError when it cannot), applies what it built
    (`apply`), and says what it is (`what`: "authentication"); its metrics have `reloaded(ok, now)`."""

    what = ""

    def __init__(self, path: str, text: str, clock: Clock, metrics) -> None:
        self.path, self.clock, self.metrics = path, clock, metrics
        #: the text last judged (good or bad): the file is judged again only once it changes
        self._tracked = text
        self._tasks: list[asyncio.Task] = []

    def build(self, text: str):
        raise NotImplementedError

    def apply(self, built) -> None:
        raise NotImplementedError

    def start(self) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(self._watch()))

    async def stop(self) -> None:
        for t in self._tasks:
            t.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _watch(self) -> None:
        while True:
            await self.clock.sleep(RELOAD_PERIOD)
            # (the read and the build in threads: a file of a few MB takes seconds to decode and compile,
            # which no request may wait on, as upstream's reload runs beside the serving goroutines)
            text = await asyncio.to_thread(self._changed)
            if text is not None:
                self._judged(await asyncio.to_thread(self._built, text))

    def reload(self) -> None:
        """The file judged once, if it changed since it was last (all of it on the caller's thread)."""
        text = self._changed()
        if text is not None:
            self._judged(self._built(text))

    def _changed(self) -> str | None:
        """The file's text where it changed since it was last judged, else None."""
        try:
            text = read_text(self.path)
        except OSError as e:  # (not tracked: a file being replaced may be back at the next read)
            log.error("failed to read %s config file: %s", self.what, e)
            self.metrics.reloaded(False, self.clock.now())
            return None
        if text == self._tracked:
            return None
        self._tracked = text
        return text

    def _built(self, text: str):
        """What the text builds, or the ValueError that says why it does not."""
        try:
            return self.build(text)
        except ValueError as e:
            return e

    def _judged(self, built) -> None:
        if isinstance(built, ValueError):
            log.error("failed to load %s config: %s", self.what, built)
            self.metrics.reloaded(False, self.clock.now())
            return
        self.apply(built)
        log.info("reloaded %s config", self.what)
        self.metrics.reloaded(True, self.clock.now())
