"""Just enough DER to assemble a leaf certificate's TBSCertificate by hand.

The signer issues thousands of near-identical leaves; building each through
`x509.CertificateBuilder` spends most of its time in generic extension
handling, so the fixed parts are encoded once per CA and only the serial,
validity, key and SAN are encoded per certificate."""

from __future__ import annotations

import datetime as _dt


def length(n: int) -> bytes:
    if n < 0x80:
        return _BYTES[n]
    if n < 0x100:
        return b"\x81" + _BYTES[n]
    raw = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return _BYTES[0x80 | len(raw)] + raw


#: one-byte strings, so tags and short lengths need no `bytes([...])` each
_BYTES = [bytes((i,)) for i in range(256)]


def tlv(tag: int, body: bytes) -> bytes:
    n = len(body)
    return _BYTES[tag] + (_BYTES[n] if n < 0x80 else length(n)) + body


def seq(*parts: bytes) -> bytes:
    return tlv(0x30, b"".join(parts))


def integer(v: int) -> bytes:
    """A non-negative INTEGER in its minimal two's-complement form."""
    return tlv(0x02, v.to_bytes(v.bit_length() // 8 + 1, "big"))


def oid(dotted: str) -> bytes:
    arcs = [int(a) for a in dotted.split(".")]
    body = bytearray([40 * arcs[0] + arcs[1]])
    for a in arcs[2:]:
        chunk = [a & 0x7F]
        a >>= 7
        while a:
            chunk.append(0x80 | (a & 0x7F))
            a >>= 7
        body += bytes(reversed(chunk))
    return tlv(0x06, bytes(body))


def time(t: _dt.datetime) -> bytes:
    """UTCTime through 2049, GeneralizedTime after, as RFC 5280 requires
    (digits taken from isoformat, which is much cheaper than strftime)."""
    iso = t.isoformat()
    digits = (iso[0:4] + iso[5:7] + iso[8:10] + iso[11:13] + iso[14:16] + iso[17:19] + "Z").encode()
    return tlv(0x17, digits[2:]) if t.year < 2050 else tlv(0x18, digits)


def extension(oid_der: bytes, value: bytes, critical: bool) -> bytes:
    """An Extension; `oid_der` is an encoded OBJECT IDENTIFIER (see `oid`)."""
    return seq(oid_der, b"\x01\x01\xff" if critical else b"", tlv(0x04, value))


def bit_string(data: bytes) -> bytes:
    return tlv(0x03, b"\x00" + data)


def read(data: bytes, pos: int) -> tuple[int, int, int]:
    """(tag, content start, content end) of the TLV at `pos`; single-byte
    tags and definite lengths, as DER has."""
    tag, n = data[pos], data[pos + 1]
    pos += 2
    if n & 0x80:
        k = n & 0x7F
        n, pos = int.from_bytes(data[pos:pos + k], "big"), pos + k
    return tag, pos, pos + n


def certificate_parts(cert: bytes) -> tuple[bytes, bytes]:
    """(SubjectPublicKeyInfo, [3] extensions or b"") TLVs, as encoded, of a
    Certificate that already parsed: TBSCertificate is version, serial,
    signature, issuer, validity, subject, spki, optional unique IDs, extensions."""
    _, pos, _ = read(cert, 0)
    _, pos, end = read(cert, pos)
    if cert[pos] == 0xA0:
        pos = read(cert, pos)[2]
    for _ in range(5):
        pos = read(cert, pos)[2]
    spki_end = read(cert, pos)[2]
    spki, pos = cert[pos:spki_end], spki_end
    while pos < end:
        tag, _, next_pos = read(cert, pos)
        if tag == 0xA3:
            return spki, cert[pos:next_pos]
        pos = next_pos
    return spki, b""
