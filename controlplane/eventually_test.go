package controlplane

import (
	"time"

	"github.com/onsi/gomega"
)

// Waits in this package for something that does come (a hung call's end, a process's exit, a
// server's stop) get ten seconds by default instead of gomega's one, which a loaded machine can
// miss; waits with a bound of their own keep it.
func init() { gomega.SetDefaultEventuallyTimeout(10 * time.Second) }
