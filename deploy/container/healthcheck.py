"""The image's HEALTHCHECK (the image has no curl): exit 0 when the receiver in this container
answers ``/healthz`` with 200, else 1 and one line saying why. It asks the port that ``run``
takes from the settings (``[receiver] port``, 8787 by default), over HTTPS when they name a TLS
certificate; a ``--port`` given to ``run`` on its command line is not seen here."""

import ssl
import sys
import urllib.request

from flowledger.config import load_config


def main() -> int:
    receiver = load_config().receiver
    context = None
    if receiver.tls_cert:
        # This process's own server, by address: what is checked is that it answers.
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    scheme = "https" if context else "http"
    url = f"{scheme}://127.0.0.1:{receiver.port}/healthz"
    try:
        with urllib.request.urlopen(url, timeout=4, context=context) as answer:
            return 0 if answer.status == 200 else 1
    except OSError as exc:
        print(f"{url}: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
