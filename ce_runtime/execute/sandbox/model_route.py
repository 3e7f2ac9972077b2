"""The host's end of a sandbox's model endpoint: a unix socket ce listens on, relaying each
connection to the model server's TCP port on the host's loopback.

A sandbox without a network of its own (bwrap's `network: model`, a docker container)
cannot reach the host's 127.0.0.1; the socket sits in a directory the sandbox sees, and
a forwarder inside (the shim's `forward`) listens on the sandbox's own 127.0.0.1 and
connects each client to it. Nothing else of the host is reachable that way.
"""

from __future__ import annotations

import asyncio
import contextlib


async def serve_unix_to_tcp(path: str, host: str, port: int) -> asyncio.AbstractServer:
    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(host, port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    return await asyncio.start_unix_server(handle, path=path)
