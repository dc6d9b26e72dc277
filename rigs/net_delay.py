"""A slow and lossy link where the kernel has no ``netem``: packets that iptables hands to an
NFQUEUE are held for a random delay and a share of them dropped (``make netfaults``).

```
ip netns exec NS python -m rigs.net_delay --queue 1 --delay-min 0.05 --delay-max 0.15 --loss 0.05
```

Run inside the network namespace whose iptables rules send packets to ``--queue`` (rules added
with ``--queue-bypass``, so that the packets pass undelayed when this process is not running). Each
packet is released ``delay-min`` to ``delay-max`` seconds after it arrived (uniformly at random) and
never before a packet queued earlier (a link reorders nothing), or dropped with probability
``--loss``: netem's ``delay … loss …`` on the path the rules select. A dropped packet is silent (its
sender gets no error: the verdict comes after the sender's call returned). Stops on SIGTERM.
"""

from __future__ import annotations

import argparse
import heapq
import random
import select
import signal
import socket
import sys
import time
from typing import Any

from netfilterqueue import COPY_META, NetfilterQueue


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--queue", type=int, default=1)
    parser.add_argument("--delay-min", type=float, default=0.05, help="seconds (0.05)")
    parser.add_argument("--delay-max", type=float, default=0.15, help="seconds (0.15)")
    parser.add_argument("--loss", type=float, default=0.05, help="share of packets dropped (0.05)")
    args = parser.parse_args()
    running = True

    def stop(_signum: int, _frame: Any) -> None:
        nonlocal running
        running = False

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    held: list[tuple[float, int, Any]] = []
    last_release = 0.0
    count = 0
    dropped = 0

    def arrived(packet: Any) -> None:
        nonlocal last_release, count, dropped
        count += 1
        if random.random() < args.loss:
            dropped += 1
            packet.drop()
            return
        release = max(last_release, time.monotonic() + random.uniform(args.delay_min, args.delay_max))
        last_release = release
        heapq.heappush(held, (release, count, packet))

    queue = NetfilterQueue()
    queue.bind(args.queue, arrived, max_len=65536, mode=COPY_META)
    sock = socket.fromfd(queue.get_fd(), socket.AF_UNIX, socket.SOCK_STREAM)
    print(f"net_delay: queue {args.queue}, {args.delay_min}-{args.delay_max} s, loss {args.loss}", flush=True)
    try:
        while running:
            wait = max(0.0, held[0][0] - time.monotonic()) if held else 0.5
            try:
                readable, _, _ = select.select([sock], [], [], wait)
            except InterruptedError:
                continue
            if readable:
                queue.run(block=False)
            now = time.monotonic()
            while held and held[0][0] <= now:
                heapq.heappop(held)[2].accept()
    finally:
        for _, _, packet in held:  # nothing held back for ever
            packet.accept()
        queue.unbind()
        sock.close()
    print(f"net_delay: {count} packets, {dropped} dropped", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
