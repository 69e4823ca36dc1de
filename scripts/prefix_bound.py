#!/usr/bin/env python3
"""Upper bound on the HPCC ring figures (ROR MB/s min / max / avg) of any
reading of OpenSM's prefix routes in which each ordered pair of subnets
crosses one router link (one router port per remote prefix, the
inter-subnet paper's "single ingress link").

Model, each assumption in the bound's favour: a host sends its message
left, then right; in each phase all hosts send at once; the flows a phase
sends from subnet s to subnet t share that pair's one link fairly (each
gets NOR / n_st), and nothing else slows anything (local flows run at
NOR). A host's figure is its two messages over the time of its two
phases, a ring's the mean over its hosts (as `ibfabric sim` measures).

Usage: scripts/prefix_bound.py [K...]   (default 2 3 6; 72 hosts per
subnet, 499 random rings and the natural one, NOR 1923 MB/s)
"""
import random
import sys

NOR = 1923.36  # MB/s, the simulator's natural ring with IB headers
HOSTS = 72


def ring_figure(order, k):
    n = len(order)
    sub = [h // HOSTS for h in order]
    rates = []
    for step in (-1, 1):
        count = {}
        for i in range(n):
            s, t = sub[i], sub[(i + step) % n]
            if s != t:
                count[(s, t)] = count.get((s, t), 0) + 1
        r = []
        for i in range(n):
            s, t = sub[i], sub[(i + step) % n]
            r.append(NOR if s == t else NOR / count[(s, t)])
        rates.append(r)
    figs = [2.0 / (1.0 / a + 1.0 / b) for a, b in zip(*rates)]
    return sum(figs) / n


def main():
    ks = [int(x) for x in sys.argv[1:]] or [2, 3, 6]
    for k in ks:
        rng = random.Random(1)
        hosts = list(range(k * HOSTS))
        figs = [ring_figure(hosts, k)]
        for _ in range(499):
            o = hosts[:]
            rng.shuffle(o)
            figs.append(ring_figure(o, k))
        rnd = figs[1:]
        print(
            f"{k} subnets: random rings min {min(rnd):.0f} / max {max(rnd):.0f} / "
            f"avg {sum(figs) / len(figs):.0f} MB/s (natural ring {figs[0]:.0f})"
        )


if __name__ == "__main__":
    main()
