"""Head + tail truncation, the one implementation: terminal observations (what the model reads), exec
and agent transcripts, verifier output all keep the first and last half of the byte budget, with the
same marker in the middle.

    limit_output(text, 10_000)                     # a string
    out = BoundedOutput(65536); out.write(chunk)   # a stream of any length, in O(limit) memory; out.text()
"""

from __future__ import annotations

MARKER = "\n[... output limited to {limit} bytes; {omitted} bytes in the middle omitted ...]\n"


def join_head_tail(head: bytes, tail: bytes, total: int, limit: int) -> str:
    """`head` + marker + `tail` (the ends of a `total`-byte text cut to `limit`); partial UTF-8
    characters at the cuts are dropped and counted as omitted."""
    head_text = head.decode("utf-8", errors="ignore")
    tail_text = tail.decode("utf-8", errors="ignore")
    omitted = total - len(head_text.encode()) - len(tail_text.encode())
    return head_text + MARKER.format(limit=limit, omitted=omitted) + tail_text


def limit_output(text: str, max_bytes: int) -> str:
    """Keep the first and last max_bytes/2 bytes of `text`, with a marker saying how much was left out."""
    data = text.encode("utf-8")
    if len(data) <= max_bytes:
        return text
    half = max_bytes // 2
    return join_head_tail(data[:half], data[-half:] if half else b"", len(data), max_bytes)


class BoundedOutput:
    """Keeps the first and last `limit/2` bytes of a stream of any length, in O(limit) memory."""

    def __init__(self, limit: int):
        self.limit = limit
        self.head_limit = limit // 2
        self.tail_limit = limit - self.head_limit
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def write(self, data: bytes) -> None:
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if data:
            self.tail += data
            if len(self.tail) > 2 * self.tail_limit:  # trim rarely, so appends stay amortised O(1)
                del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.head_limit + self.tail_limit

    def text(self) -> str:
        if not self.truncated:
            return (bytes(self.head) + bytes(self.tail)).decode("utf-8", errors="replace")
        tail = bytes(self.tail[-self.tail_limit:]) if self.tail_limit else b""
        return join_head_tail(bytes(self.head), tail, self.total, self.limit)
