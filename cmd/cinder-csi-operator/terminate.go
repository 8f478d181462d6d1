package main

import (
	"context"
	"crypto/sha256"
	"os"
	"time"

	"github.com/go-logr/logr"
)

// exitOnChange returns a context that ends with parent or, as library-go's --terminate-on-files
// makes csi-operator exit, when one of files changes after the call: its content, or whether it
// can be read. The files are read every interval. The kubelet then restarts the container,
// which reads the new file: cluster-storage-operator names the --config file, so a new
// configuration takes effect. With no files, parent is returned.
func exitOnChange(parent context.Context, files []string, interval time.Duration, log logr.Logger) context.Context {
	if len(files) == 0 {
		return parent
	}
	ctx, cancel := context.WithCancel(parent)
	initial := make([]fileState, len(files))
	for i, f := range files {
		initial[i] = readState(f)
	}
	go func() {
		defer cancel()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			for i, f := range files {
				if readState(f) != initial[i] {
					log.Info("Exiting because a --terminate-on-files file changed", "file", f)
					return
				}
			}
		}
	}()
	return ctx
}

// fileState is a file's content digest, or that it could not be read.
type fileState struct {
	readable bool
	sum      [sha256.Size]byte
}

func readState(path string) fileState {
	b, err := os.ReadFile(path)
	if err != nil {
		return fileState{}
	}
	return fileState{readable: true, sum: sha256.Sum256(b)}
}
