#!/usr/bin/env python3
"""Decode the QR code in a PNG and print its text.

Usage: python3 Tests/system/qr-decode.py <file.png>

Prints the decoded text followed by a newline and exits 0, or prints an error to
stderr and exits 1. Needs zxing-cpp and Pillow (prebuilt wheels, no system libraries):

    python3 -m pip install zxing-cpp pillow
"""
import sys
from typing import NoReturn

PIP_HINT = "python3 -m pip install zxing-cpp pillow"


def fail(message: str) -> NoReturn:
    print(f"qr-decode: {message}", file=sys.stderr)
    sys.exit(1)


def main() -> None:
    if len(sys.argv) != 2:
        fail("usage: python3 Tests/system/qr-decode.py <file.png>")
    path = sys.argv[1]

    try:
        import zxingcpp
    except ImportError:
        fail(f"Python module 'zxingcpp' is missing; install it with: {PIP_HINT}")
    try:
        from PIL import Image
    except ImportError:
        fail(f"Python module 'PIL' (Pillow) is missing; install it with: {PIP_HINT}")

    try:
        with Image.open(path) as image:
            image.load()
            gray = image.convert("L")
    except (OSError, ValueError) as error:
        fail(f"cannot read image {path}: {error}")

    results = zxingcpp.read_barcodes(gray, formats=zxingcpp.BarcodeFormat.QRCode)
    if not results:
        fail(f"no QR code found in {path}")
    if len(results) > 1:
        fail(f"{len(results)} QR codes found in {path}, expected one")
    result = results[0]

    # Without an ECI header (symbology ]Q1) byte-mode data has no declared charset and zxing
    # guesses one; our encoder always writes UTF-8, so prefer the raw bytes when they are UTF-8.
    payload = result.text.encode("utf-8")
    if result.symbology_identifier == "]Q1":
        try:
            result.bytes.decode("utf-8")
            payload = bytes(result.bytes)
        except UnicodeDecodeError:
            pass

    # Write bytes so the output is exact regardless of the terminal locale.
    sys.stdout.buffer.write(payload + b"\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
