"""Verifies agent card signatures with the reference SDK's own verifier (a2a-sdk 1.3.0).

Used by tests/it/card_signing.rs as an implementation independent of the gateway's: the SDK
parses the card as its client does (`a2a.client.card_resolver.parse_agent_card`), makes
the canonical payload with its own JCS, and checks the JWS with PyJWT + cryptography.

stdin: {"keys": {"<kid>": "<PEM private or public key>"}, "cards": [<card JSON>, ...]}
stdout: {"verdicts": [per card "valid" or "invalid: <reason>"], "payloads": [per card the
SDK's canonical payload (a private SDK helper), to compare with the signer's bytes]}.
Exit 0 whenever the input could be read; the verdicts are the caller's to judge.
"""

import json
import sys

from cryptography.hazmat.primitives import serialization
from jwt.exceptions import InvalidKeyError

from a2a.client.card_resolver import parse_agent_card
from a2a.utils.signing import (
    SignatureVerificationError,
    _canonicalize_agent_card,
    create_signature_verifier,
)


def public_key(pem: str):
    data = pem.encode()
    if b'PRIVATE KEY' in data:
        return serialization.load_pem_private_key(data, password=None).public_key()
    return serialization.load_pem_public_key(data)


def main() -> int:
    request = json.load(sys.stdin)
    keys = {kid: public_key(pem) for kid, pem in request['keys'].items()}

    def key_provider(kid, _jku):
        # The verifier skips a signature when the provider raises a PyJWTError.
        if kid not in keys:
            raise InvalidKeyError(f'unknown kid {kid!r}')
        return keys[kid]

    verify = create_signature_verifier(key_provider, ['ES256', 'RS256'])
    verdicts = []
    payloads = []
    for data in request['cards']:
        card = parse_agent_card(data)
        payloads.append(_canonicalize_agent_card(card))
        try:
            verify(card)
            verdicts.append('valid')
        except SignatureVerificationError as e:
            verdicts.append(f'invalid: {e}')
    json.dump({'verdicts': verdicts, 'payloads': payloads}, sys.stdout)
    return 0


if __name__ == '__main__':
    sys.exit(main())
