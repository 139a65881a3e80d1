#!/usr/bin/env python3
"""Prints a TCP port on 127.0.0.1 that nothing holds now, for the tests that must name a root's
port before any rank starts (torchrun's MASTER_PORT, Open MPI's and Slurm's WEFT_ROOT,
NCCL_COMM_ID).

The port is below Linux's ephemeral range (32768-60999 by default): a port in that range may be
any connection's local end, and once was (a root's bind failed, "Address already in use"). The
search starts at a port taken from the caller's pid, so that two tests started at once try
different ports first, and takes the first one it can bind as the root binds it (SO_REUSEADDR,
on 127.0.0.1). A port picked this way can still be taken by another program before the root
binds it; the tests that used a port from their pid alone failed when anything held it.

  free_port.py        prints e.g. 24717; exits 1 (saying so) if none of the 12000 is free
"""
import os
import socket
import sys

LOW, SPAN = 20000, 12000


def bindable(port):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def main():
    start = os.getppid() % SPAN
    for i in range(SPAN):
        port = LOW + (start + i) % SPAN
        if bindable(port):
            print(port)
            return 0
    print(f"free_port.py: no port from {LOW} to {LOW + SPAN - 1} could be bound", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
