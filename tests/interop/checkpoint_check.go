// Reads a flowledger vkey, a witness's vkey and a cosigned checkpoint with the code of
// golang.org/x/mod/sumdb/note, then checks an inclusion and a consistency proof with
// golang.org/x/mod/sumdb/tlog. The cosignature verifier is written here from C2SP
// tlog-cosignature (x/mod reads Ed25519 signatures, type 0x01, only).
//
// Arguments: the log's vkey, the witness's vkey, the note's file, a leaf's index and hash,
// its inclusion proof (comma-separated base64), an older size, its root and the consistency
// proof from it.
package main

import (
	"bytes"
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"

	"interop/sumdb/note"
	"interop/sumdb/tlog"
)

type cosignatureV1 struct {
	name string
	hash uint32
	key  ed25519.PublicKey
}

func (v cosignatureV1) Name() string    { return v.name }
func (v cosignatureV1) KeyHash() uint32 { return v.hash }
func (v cosignatureV1) Verify(msg, sig []byte) bool {
	if len(sig) != 8+ed25519.SignatureSize {
		return false
	}
	t := binary.BigEndian.Uint64(sig[:8])
	m := append([]byte(fmt.Sprintf("cosignature/v1\ntime %d\n", t)), msg...)
	return t != 0 && ed25519.Verify(v.key, m, sig[8:])
}

func witnessVerifier(vkey string) cosignatureV1 {
	parts := strings.SplitN(vkey, "+", 3)
	key, err := base64.StdEncoding.DecodeString(parts[2])
	must(err)
	if len(key) != 33 || key[0] != 0x04 {
		fail("the witness vkey is not of type 0x04")
	}
	sum := sha256.Sum256(append([]byte(parts[0]+"\n"), key...))
	hash, err := strconv.ParseUint(parts[1], 16, 32)
	must(err)
	if uint32(hash) != binary.BigEndian.Uint32(sum[:4]) {
		fail("the witness vkey's id is not SHA-256(name || 0x0A || 0x04 || key)[:4]")
	}
	return cosignatureV1{parts[0], uint32(hash), ed25519.PublicKey(key[1:])}
}

func hashes(list string) []tlog.Hash {
	var out []tlog.Hash
	for _, b := range strings.Split(list, ",") {
		if b == "" {
			continue
		}
		h, err := tlog.ParseHash(b)
		must(err)
		out = append(out, h)
	}
	return out
}

func main() {
	a := os.Args[1:]
	logV, err := note.NewVerifier(strings.TrimSpace(a[0]))
	must(err)
	wV := witnessVerifier(strings.TrimSpace(a[1]))
	msg, err := os.ReadFile(a[2])
	must(err)
	n, err := note.Open(msg, note.VerifierList(logV, wV))
	must(err)
	signedBy := map[string]bool{}
	for _, s := range n.Sigs {
		signedBy[s.Name] = true
	}
	if !signedBy[logV.Name()] || !signedBy[wV.Name()] {
		fail("the note is not signed by both the log and the witness")
	}
	lines := strings.Split(n.Text, "\n")
	if lines[0] != logV.Name() {
		fail("the origin is not the log key's name")
	}
	size, err := strconv.ParseInt(lines[1], 10, 64)
	must(err)
	root, err := tlog.ParseHash(lines[2])
	must(err)
	index, err := strconv.ParseInt(a[3], 10, 64)
	must(err)
	leaf, err := tlog.ParseHash(a[4])
	must(err)
	must(tlog.CheckRecord(hashes(a[5]), size, root, index, leaf))
	old, err := strconv.ParseInt(a[6], 10, 64)
	must(err)
	oldRoot, err := tlog.ParseHash(a[7])
	must(err)
	must(tlog.CheckTree(hashes(a[8]), size, root, old, oldRoot))
	if !bytes.HasSuffix(msg, []byte("\n")) {
		fail("the note does not end in a newline")
	}
	fmt.Printf("go ok: %s at %d, cosigned by %s\n", logV.Name(), size, wV.Name())
}

func must(err error) {
	if err != nil {
		fail(err.Error())
	}
}

func fail(why string) {
	fmt.Println("go FAILED:", why)
	os.Exit(1)
}
