"""Decoder for unix `compress` (.Z) files: LZW with variable-width codes.

Format: magic 1f 9d; a flags byte (low 5 bits = max code width, 9..16; 0x80 = block
mode); then codes packed LSB-first. Codes start 9 bits wide; 0..255 are bytes and, in
block mode, 256 is CLEAR (reset the table and the width), so new entries start at 257
(256 without block mode). Codes are written in groups of 8, i.e. `width` bytes per group.
The width grows by one before reading a code once the next free entry would not fit
(free > 2**width - 1); at the max width the table just stops growing. (As in gzip's
reader, a file with max width 9 still moves to 10 bits once its 512 entries are used.) Quirk: when the width
changes, and after a
CLEAR, the rest of the current group is skipped (the reader moves on to the next multiple
of `width` bytes counted from where this width started), as the original compress does.
"""

from __future__ import annotations

MAGIC = b"\x1f\x9d"
CLEAR = 256


class LZWError(ValueError):
    """Input is not a valid .Z stream."""


def decompress(data: bytes) -> bytes:
    """Decode a whole .Z file (header included) and return the original bytes."""
    data = bytes(data)
    if len(data) < 3 or data[:2] != MAGIC:
        raise LZWError("not a .Z file (no 1f 9d magic)")
    flags = data[2]
    max_bits, block = flags & 0x1F, bool(flags & 0x80)
    if flags & 0x60:
        raise LZWError(f"unknown flags in header byte {flags:#04x}")
    if not 9 <= max_bits <= 16:
        raise LZWError(f"max code width {max_bits} not in 9..16")
    max_entries = 1 << max_bits
    base = [bytes([i]) for i in range(256)] + ([b""] if block else [])

    table = list(base)
    width, max_code = 9, (1 << 9) - 1
    prev = b""  # empty: the next code must be a literal and adds no entry
    out = bytearray()
    pos, end = 3, len(data)
    while pos < end:
        if len(table) > max_code:  # widen (we are at a group boundary)
            width += 1
            max_code = max_entries if width >= max_bits else (1 << width) - 1
        group = data[pos:pos + width]
        pos += width  # the whole group is consumed, whatever is left of it is skipped
        bits, avail, off, mask = int.from_bytes(group, "little"), 8 * len(group), 0, (1 << width) - 1
        while off + width <= avail:
            if len(table) > max_code:
                break  # width change: skip the rest of this group
            code = (bits >> off) & mask
            off += width
            if block and code == CLEAR:
                table = list(base)
                width, max_code, prev = 9, (1 << 9) - 1, b""
                break  # skip the rest of this group
            if not prev:
                if code >= 256:
                    raise LZWError(f"first code {code} after start/CLEAR is not a byte (at byte {pos})")
                prev = base[code]
                out += prev
                continue
            n = len(table)
            if code < n:
                entry = table[code]
            elif code == n and n < max_entries:
                entry = prev + prev[:1]
            else:
                raise LZWError(f"invalid code {code} (table has {n} entries; corrupt data near byte {pos})")
            out += entry
            if n < max_entries:
                table.append(prev + entry[:1])
            prev = entry
    return bytes(out)
