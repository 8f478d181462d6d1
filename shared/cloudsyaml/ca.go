package cloudsyaml

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"fmt"
)

// CheckCA checks that data is a bundle of PEM certificates: at least one CERTIFICATE block, each
// one an X.509 certificate Go parses, and outside the blocks nothing but blank lines and '#'
// comment lines (the distributions' trust bundles annotate each certificate that way). It
// returns a fault that reads after the bundle's name, naming a line but never quoting it, or "".
//
// The driver (client-go's cert.NewPool) is laxer: it skips text and blocks of other types, and
// fails only without any certificate or on one that does not parse. Anything else here is
// refused all the same, because the bundle is copied into a ConfigMap that anyone who can read
// the namespace sees (a private key pasted by mistake, say).
func CheckCA(data []byte) string {
	rest := data
	certs := 0
	for {
		// Skip blank and comment lines up to the next block or the end.
		for len(rest) > 0 {
			line, after, _ := bytes.Cut(rest, []byte("\n"))
			trimmed := bytes.TrimSpace(line)
			if len(trimmed) > 0 && trimmed[0] != '#' {
				break
			}
			rest = after
		}
		if len(rest) == 0 {
			break
		}
		at := lineOf(data, rest)
		// Go's PEM decoder, the driver's too, finds a block only at the start of a line.
		if !bytes.HasPrefix(rest, []byte("-----BEGIN ")) {
			return fmt.Sprintf("has text outside a PEM certificate at line %d.", at)
		}
		// Decode this block alone: pem.Decode skips a malformed block and returns the next one.
		end := len(rest)
		if i := bytes.Index(rest, []byte("\n-----END ")); i >= 0 {
			if j := bytes.IndexByte(rest[i+1:], '\n'); j >= 0 {
				end = i + 1 + j + 1
			}
		}
		block, tail := pem.Decode(rest[:end])
		if block == nil || len(bytes.TrimSpace(tail)) > 0 {
			return fmt.Sprintf("has a PEM block at line %d that does not decode.", at)
		}
		after := rest[end:]
		if block.Type != "CERTIFICATE" {
			return fmt.Sprintf("has a PEM block at line %d that is not a CERTIFICATE.", at)
		}
		if _, err := x509.ParseCertificate(block.Bytes); err != nil {
			return fmt.Sprintf("has a CERTIFICATE at line %d that is not a valid X.509 certificate.", at)
		}
		certs++
		rest = after
	}
	if certs == 0 {
		return "holds no PEM certificate."
	}
	return ""
}

// lineOf returns the 1-based line of data at which its suffix rest starts.
func lineOf(data, rest []byte) int {
	return bytes.Count(data[:len(data)-len(rest)], []byte("\n")) + 1
}
