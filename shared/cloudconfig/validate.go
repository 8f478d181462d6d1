package cloudconfig

import (
	"strconv"
	"strings"
	"time"
)

// validator checks one value the way the driver parses it and returns why it is refused, or ""
// when it is fine. Catching these here turns a driver crash loop on every node into one
// Degraded condition that names the key and line.
type validator func(value string) string

// blockStorageValidators cover the typed [BlockStorage] keys of cinder-csi-plugin. Unknown keys
// are passed through unchecked: gcfg ignores them and newer drivers may know them.
var blockStorageValidators = map[string]validator{
	"node-volume-attach-limit":   validInt64,
	"rescan-on-resize":           validBool,
	"ignore-volume-az":           validBool,
	"ignore-volume-microversion": validBool,
}

// metadataValidators cover the [Metadata] keys the node service reads.
var metadataValidators = map[string]validator{
	"search-order":    validSearchOrder,
	"request-timeout": validDuration,
}

// validBool accepts gcfg's boolean spellings, in any case.
func validBool(v string) string {
	switch strings.ToLower(v) {
	case "true", "yes", "on", "1", "false", "no", "off", "0":
		return ""
	}
	return "must be a boolean: true, false, yes, no, on, off, 1 or 0"
}

// validInt64 accepts what gcfg accepts for an int64: decimal with an optional sign, or
// hexadecimal with a 0x prefix. (The driver clamps the attach limit to 1..256 itself.)
func validInt64(v string) string {
	digits, base := v, 10
	if h, ok := strings.CutPrefix(strings.TrimPrefix(v, "-"), "0x"); ok {
		if h == "" || h[0] == '-' || h[0] == '+' {
			return "must be an integer"
		}
		digits, base = h, 16
		if strings.HasPrefix(v, "-") {
			digits = "-" + h
		}
	}
	// strconv with an explicit base rejects the underscores and 0o/0b prefixes gcfg rejects.
	if _, err := strconv.ParseInt(digits, base, 64); err != nil {
		return "must be an integer"
	}
	return ""
}

// validSearchOrder mirrors the driver's check of [Metadata] search-order: one or two of
// configDrive and metadataService, comma separated, case-sensitive.
func validSearchOrder(v string) string {
	const reason = `must be "configDrive", "metadataService" or both, comma separated`
	elems := strings.Split(v, ",")
	if v == "" || len(elems) > 2 {
		return reason
	}
	for _, e := range elems {
		if e = strings.TrimSpace(e); e != "configDrive" && e != "metadataService" {
			return reason
		}
	}
	return ""
}

// validDuration accepts what the driver's duration type accepts (time.ParseDuration).
func validDuration(v string) string {
	if _, err := time.ParseDuration(v); err != nil {
		return `must be a duration such as "30s" or "1m"`
	}
	return ""
}
