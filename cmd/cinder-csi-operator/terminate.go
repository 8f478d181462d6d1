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
// can be read. The files are read every interval, and a change counts once two reads in a row
// agree on it, so a file caught between its truncation and its write (a rewrite that is not an
// atomic rename) does not end the context. The kubelet then restarts the container, which reads
// the new file: cluster-storage-operator names the --config file, so a new configuration takes
// effect. With no files, parent is returned.
func exitOnChange(parent context.Context, files []string, interval time.Duration, log logr.Logger) context.Context {
	if len(files) == 0 {
		return parent
	}
	ctx, cancel := context.WithCancel(parent)
	w := newFileWatch(files)
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
			if f, changed := w.observe(); changed {
				log.Info("Exiting because a --terminate-on-files file changed", "file", f)
				return
			}
		}
	}()
	return ctx
}

// fileWatch holds each file's state at the start and at the previous read.
type fileWatch struct {
	files    []string
	initial  []fileState
	previous []fileState
	read     func(string) fileState
}

func newFileWatch(files []string) *fileWatch {
	w := &fileWatch{files: files, read: readState}
	for _, f := range files {
		s := w.read(f)
		w.initial = append(w.initial, s)
		w.previous = append(w.previous, s)
	}
	return w
}

// observe reads every file once and names the first one whose state differs from the initial
// one and is the same as at the previous read.
func (w *fileWatch) observe() (string, bool) {
	changed, name := false, ""
	for i, f := range w.files {
		s := w.read(f)
		if !changed && s != w.initial[i] && s == w.previous[i] {
			changed, name = true, f
		}
		w.previous[i] = s
	}
	return name, changed
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
