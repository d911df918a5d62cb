"""A TCP proxy that delays each response by a fixed time: an object store's latency for a local server.

    python docs/examples/latency_proxy.py LISTEN_PORT UPSTREAM_HOST:PORT [DELAY_MS]

Every connection to 127.0.0.1:LISTEN_PORT is relayed to the upstream server. Bytes from the
client go through at once; the first bytes the server sends after each request wait DELAY_MS
(default 20) before they are passed on, the rest of that response follows without delay. So
each HTTP request/response costs DELAY_MS more, as a request to a bucket in another building
would, while the bytes still flow at the local server's speed.
"""

import asyncio
import sys


async def _pipe(reader, writer, delay, state, upstream_to_client):
    try:
        while True:
            data = await reader.read(1 << 20)  # big reads: the proxy should cost the machine little
            if not data:
                break
            if upstream_to_client and state["request"]:
                state["request"] = False
                await asyncio.sleep(delay)  # the response's first byte arrives DELAY_MS later
            elif not upstream_to_client:
                state["request"] = True
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def _serve(listen_port, upstream, delay):
    host, port = upstream.rsplit(":", 1)

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(host, int(port))
        except OSError:
            client_writer.close()
            return
        state = {"request": False}
        await asyncio.gather(_pipe(client_reader, server_writer, delay, state, False),
                             _pipe(server_reader, client_writer, delay, state, True))

    server = await asyncio.start_server(handle, "127.0.0.1", listen_port)
    async with server:
        await server.serve_forever()


def main(argv):
    if len(argv) not in (3, 4):
        sys.exit(__doc__)
    asyncio.run(_serve(int(argv[1]), argv[2], (float(argv[3]) if len(argv) == 4 else 20.0) / 1000))


if __name__ == "__main__":
    main(sys.argv)
