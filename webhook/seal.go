package webhook

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PayloadKey seals stored payloads with AES-256-GCM. A delivery can hold
// the customer's name, e-mail and document; sealed, the store (and its
// backups, replicas and operators) keeps only ciphertext, and the key lives
// with the application.
//
// Every sealed payload names the ID of the key that sealed it, so keys
// rotate without re-encrypting: put the new key first in
// Config.PayloadKeys and keep the old one after it until every event it
// sealed is gone (the retention, 30 days by default, removes them).
type PayloadKey struct {
	// ID names the key inside each payload it seals: 1 to 32 of
	// A-Z a-z 0-9 . _ - (it is stored in clear; never derive it from the key).
	ID string
	// Secret is the AES-256 key: 32 random bytes (e.g. openssl rand -base64 32).
	Secret []byte
}

var keyID = regexp.MustCompile(`^[A-Za-z0-9._-]{1,32}$`)

// Check reports what is wrong with k, naming the field.
func (k PayloadKey) Check() error {
	if !keyID.MatchString(k.ID) {
		return fmt.Errorf("payload key ID %q: want 1 to 32 of A-Z a-z 0-9 . _ -", k.ID)
	}
	if len(k.Secret) != 32 {
		return fmt.Errorf("payload key %q: secret has %d bytes, want 32 (AES-256)", k.ID, len(k.Secret))
	}
	return nil
}

// ParsePayloadKeys reads keys written "id:base64secret", separated by
// commas, the sealing key first, e.g. the value of an environment variable:
//
//	PAGPOLAR_WEBHOOK_PAYLOAD_KEYS="k2:$(openssl rand -base64 32),k1:<the old one>"
//
// The secret is standard or URL-safe base64, padded or not. Errors name the
// key's position and ID, never its secret.
func ParsePayloadKeys(s string) ([]PayloadKey, error) {
	var keys []PayloadKey
	seen := map[string]bool{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		id, enc, ok := strings.Cut(part, ":")
		if !ok {
			return nil, fmt.Errorf("webhook: payload key %d: want id:base64secret", i+1)
		}
		secret, err := decodeBase64(strings.TrimSpace(enc))
		if err != nil {
			return nil, fmt.Errorf("webhook: payload key %d (%q): secret is not base64", i+1, id)
		}
		k := PayloadKey{ID: strings.TrimSpace(id), Secret: secret}
		if err := k.Check(); err != nil {
			return nil, fmt.Errorf("webhook: payload key %d: %w", i+1, err)
		}
		if seen[k.ID] {
			return nil, fmt.Errorf("webhook: payload key %d: ID %q given twice", i+1, k.ID)
		}
		seen[k.ID] = true
		keys = append(keys, k)
	}
	return keys, nil
}

func decodeBase64(s string) ([]byte, error) {
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			return b, nil
		}
	}
	return nil, errors.New("not base64")
}

// Errors of OpenPayload (and of processing a stored event).
var (
	// ErrPayloadKeyMissing: the payload is sealed with a key ID that is not
	// configured. Add the key (rotation keeps old keys after the new one).
	ErrPayloadKeyMissing = errors.New("webhook: payload sealed with a key that is not configured")
	// ErrPayloadCorrupt: the sealed payload does not authenticate under its
	// key (a wrong secret under the right ID, or the stored bytes changed).
	ErrPayloadCorrupt = errors.New("webhook: sealed payload does not authenticate")
)

// A sealed payload is
//
//	0x00 "PW1" len(id) id nonce(12) ciphertext+tag(16)
//
// A body is stored only once it parsed as a JSON object, so it never starts
// with 0x00: a payload without the marker is a plaintext body (stored by an
// Inbox without keys, or before they were configured). The additional data
// binds the ciphertext to its dedupe key and key ID, so a payload copied
// onto another record does not open.
var sealMagic = []byte("\x00PW1")

const sealAAD = "pagpolar-webhook-payload/v1\x00"

// sealer seals with its first key and opens with any.
type sealer struct {
	seal  PayloadKey
	aeads map[string]cipher.AEAD
}

func newSealer(keys []PayloadKey) (*sealer, error) {
	s := &sealer{aeads: make(map[string]cipher.AEAD, len(keys))}
	for i, k := range keys {
		if err := k.Check(); err != nil {
			return nil, fmt.Errorf("PayloadKeys[%d]: %w", i, err)
		}
		if _, dup := s.aeads[k.ID]; dup {
			return nil, fmt.Errorf("PayloadKeys[%d]: ID %q given twice", i, k.ID)
		}
		block, err := aes.NewCipher(k.Secret)
		if err != nil {
			return nil, fmt.Errorf("PayloadKeys[%d]: %w", i, err)
		}
		aead, err := cipher.NewGCM(block)
		if err != nil {
			return nil, fmt.Errorf("PayloadKeys[%d]: %w", i, err)
		}
		s.aeads[k.ID] = aead
	}
	s.seal = keys[0]
	return s, nil
}

func aad(recordKey, id string) []byte {
	return []byte(sealAAD + recordKey + "\x00" + id)
}

// sealBody seals body for the record stored under recordKey.
func (s *sealer) sealBody(recordKey string, body []byte) ([]byte, error) {
	aead := s.aeads[s.seal.ID]
	id := s.seal.ID
	out := make([]byte, 0, len(sealMagic)+1+len(id)+aead.NonceSize()+len(body)+aead.Overhead())
	out = append(out, sealMagic...)
	out = append(out, byte(len(id)))
	out = append(out, id...)
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return nil, fmt.Errorf("webhook: sealing payload: %w", err)
	}
	out = append(out, nonce...)
	return aead.Seal(out, nonce, body, aad(recordKey, id)), nil
}

// Sealed reports whether a stored payload is sealed, and the ID of the key
// that sealed it.
func Sealed(payload []byte) (keyID string, ok bool) {
	id, _, ok := splitSealed(payload)
	return id, ok
}

func splitSealed(p []byte) (id string, rest []byte, ok bool) {
	if !bytes.HasPrefix(p, sealMagic) || len(p) < len(sealMagic)+1 {
		return "", nil, false
	}
	n := int(p[len(sealMagic)])
	start := len(sealMagic) + 1
	if n == 0 || len(p) < start+n {
		return "", nil, false
	}
	return string(p[start : start+n]), p[start+n:], true
}

// open returns the body of a stored payload.
func (s *sealer) open(recordKey string, payload []byte) ([]byte, error) {
	if payload == nil || !bytes.HasPrefix(payload, sealMagic) {
		return payload, nil // a plaintext body
	}
	id, rest, ok := splitSealed(payload)
	if !ok {
		return nil, fmt.Errorf("%w: truncated header", ErrPayloadCorrupt)
	}
	if s == nil {
		return nil, fmt.Errorf("%w: key %q (no Config.PayloadKeys)", ErrPayloadKeyMissing, id)
	}
	aead, ok := s.aeads[id]
	if !ok {
		return nil, fmt.Errorf("%w: key %q", ErrPayloadKeyMissing, id)
	}
	if len(rest) < aead.NonceSize()+aead.Overhead() {
		return nil, fmt.Errorf("%w: key %q: too short", ErrPayloadCorrupt, id)
	}
	nonce, ct := rest[:aead.NonceSize()], rest[aead.NonceSize():]
	body, err := aead.Open(nil, nonce, ct, aad(recordKey, id))
	if err != nil {
		return nil, fmt.Errorf("%w: key %q", ErrPayloadCorrupt, id)
	}
	return body, nil
}

// OpenPayload returns rec's body as received: rec.Payload itself if it is
// not sealed, or opened with the key of keys it names (ErrPayloadKeyMissing
// if none has that ID, ErrPayloadCorrupt if it does not authenticate). It is
// what an operator tool uses to show a stored body.
func OpenPayload(rec Record, keys ...PayloadKey) ([]byte, error) {
	var s *sealer
	if len(keys) > 0 {
		var err error
		if s, err = newSealer(keys); err != nil {
			return nil, fmt.Errorf("webhook: OpenPayload: %w", err)
		}
	}
	return s.open(rec.Key, rec.Payload)
}
