package metricsauth

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	certutil "k8s.io/client-go/util/cert"
)

// ServingCert is the metrics endpoint's serving certificate: the pair tls.crt and tls.key of a
// directory (the Secret service-ca issues, mounted as a volume) whenever they are there and make
// a valid pair, a self-signed certificate otherwise. It is a tls.Config.GetCertificate callback
// and looks again at every handshake, so files that appear after the start are served from the
// next connection on.
//
// controller-runtime's metrics server cannot do that: it decides once, at its start, between
// certwatcher (which only watches files that exist) and a self-signed certificate it keeps for
// the life of the process. The pod's serving-cert volume is optional, so a pod that starts before
// service-ca has written the Secret gets an empty directory, which the kubelet fills later; with
// controller-runtime's choice, Prometheus then fails to verify every scrape until a restart.
//
// At rest a handshake costs two stat calls: the files are read and parsed only when a stat
// differs from the last one read. The kubelet writes a Secret volume by building a new
// timestamped directory and swapping the ..data symlink to it, so tls.crt and tls.key resolve to
// new files, with new inodes, at once.
type ServingCert struct {
	dir, certFile, keyFile string
	log                    logr.Logger

	selfSignedOnce sync.Once
	selfSigned     *tls.Certificate
	selfSignedErr  error

	mu sync.Mutex
	// seen is what a stat saw of the files when they were last read, valid or not.
	seen stamp
	// loaded is the last valid pair read; nil when the files are absent.
	loaded *tls.Certificate
}

// stamp is what a stat sees of tls.crt and tls.key, through their symlinks; a nil member is an
// absent file.
type stamp struct {
	cert, key os.FileInfo
}

// same reports whether a and b see the same versions of both files.
func (a stamp) same(b stamp) bool { return sameVersion(a.cert, b.cert) && sameVersion(a.key, b.key) }

func (a stamp) present() bool { return a.cert != nil && a.key != nil }

// sameVersion reports whether a and b are the same file with the same size and modification
// time: a symlink swap shows as a new inode, a rewrite in place as a new time or size.
func sameVersion(a, b os.FileInfo) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// NewServingCert returns the serving certificate of dir; an empty dir means the self-signed
// certificate only. Nothing is read or generated until the first handshake.
func NewServingCert(dir string, log logr.Logger) *ServingCert {
	s := &ServingCert{dir: dir, log: log}
	if dir != "" {
		s.certFile, s.keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	}
	return s
}

// GetCertificate is the tls.Config.GetCertificate callback: the directory's pair when it is
// present and valid, else the self-signed certificate. When the files change into an invalid
// pair (a writer other than the kubelet, caught between the two files), the last valid pair
// stays in force until they change again, as with controller-runtime's certwatcher.
func (s *ServingCert) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	if c := s.current(); c != nil {
		return c, nil
	}
	return s.selfSignedCert()
}

// current returns the directory's pair in force, re-reading the files when a stat shows they
// changed, or nil when they are absent.
func (s *ServingCert) current() *tls.Certificate {
	if s.dir == "" {
		return nil
	}
	now := stamp{cert: stat(s.certFile), key: stat(s.keyFile)}
	s.mu.Lock()
	defer s.mu.Unlock()
	if now.same(s.seen) {
		return s.loaded
	}
	// The stat was taken before the read, so a swap in between is read now and read again at
	// the next handshake, never missed.
	s.seen = now
	if !now.present() {
		if s.loaded != nil {
			s.log.Info("Serving a self-signed certificate: the serving certificate's files are gone", "dir", s.dir)
		}
		s.loaded = nil
		return nil
	}
	c, err := tls.LoadX509KeyPair(s.certFile, s.keyFile)
	if err != nil {
		s.log.Error(err, "Keeping the certificate in force: the serving certificate's files are not a valid pair", "dir", s.dir)
		return s.loaded
	}
	s.log.Info("Serving the mounted serving certificate", "dir", s.dir, "notAfter", c.Leaf.NotAfter.UTC().Format(time.RFC3339))
	s.loaded = &c
	return s.loaded
}

// stat stats path through its symlinks; nil when it cannot.
func stat(path string) os.FileInfo {
	fi, err := os.Stat(path)
	if err != nil {
		return nil
	}
	return fi
}

// selfSignedCert returns the self-signed certificate, made at its first use, so that a pod whose
// files are there from the start never pays for the RSA keys. It is the one controller-runtime
// makes: RSA (which every cipher suite of every TLS profile can use), for localhost and
// 127.0.0.1, signed by a CA made with it.
func (s *ServingCert) selfSignedCert() (*tls.Certificate, error) {
	s.selfSignedOnce.Do(func() {
		cert, key, err := certutil.GenerateSelfSignedCertKeyWithFixtures("localhost", []net.IP{net.IPv4(127, 0, 0, 1)}, nil, "")
		if err != nil {
			s.selfSignedErr = fmt.Errorf("generating the metrics endpoint's self-signed certificate: %w", err)
			return
		}
		c, err := tls.X509KeyPair(cert, key)
		if err != nil {
			s.selfSignedErr = fmt.Errorf("loading the metrics endpoint's self-signed certificate: %w", err)
			return
		}
		s.selfSigned = &c
	})
	return s.selfSigned, s.selfSignedErr
}
