package connectproxy

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
)

// connect sends one request line to the proxy and returns its status and the connection.
func connect(g Gomega, p *Proxy, method, target, auth string) (int, net.Conn) {
	c, err := net.Dial("tcp", p.Addr())
	g.Expect(err).NotTo(HaveOccurred())
	req := fmt.Sprintf("%s %s HTTP/1.1\r\nHost: %s\r\n", method, target, target)
	if auth != "" {
		req += "Proxy-Authorization: Basic " + auth + "\r\n"
	}
	_, err = io.WriteString(c, req+"\r\n")
	g.Expect(err).NotTo(HaveOccurred())
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	g.Expect(err).NotTo(HaveOccurred())
	// The answer has no body; the connection is the tunnel, which the caller closes.
	_ = resp.Body.Close()
	return resp.StatusCode, c
}

func TestProxy(t *testing.T) {
	t.Parallel()
	g := NewWithT(t)
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = echo.Close() }()
	go func() {
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(c, c); _ = c.Close() }()
		}
	}()
	_, echoPort, _ := net.SplitHostPort(echo.Addr().String())

	p, err := Start(Options{Hosts: map[string]string{"echo.onion": "127.0.0.1"}})
	g.Expect(err).NotTo(HaveOccurred())
	defer p.Close()

	t.Run("When asked for a known host, it should tunnel to the address it maps to", func(t *testing.T) {
		g := NewWithT(t)
		// "csi:pw" in base64; only the user is kept.
		status, c := connect(g, p, http.MethodConnect, "echo.onion:"+echoPort, "Y3NpOnB3")
		defer func() { _ = c.Close() }()
		g.Expect(status).To(Equal(http.StatusOK))
		_, err := io.WriteString(c, "ping")
		g.Expect(err).NotTo(HaveOccurred())
		buf := make([]byte, 4)
		_, err = io.ReadFull(c, buf)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(string(buf)).To(Equal("ping"))
		g.Expect(p.Connects()).To(ContainElement(Connect{Target: "echo.onion:" + echoPort, User: "csi", Status: http.StatusOK}))
	})

	t.Run("When asked for a host it does not know, it should answer 502 and dial nothing", func(t *testing.T) {
		g := NewWithT(t)
		status, c := connect(g, p, http.MethodConnect, "example.com:443", "")
		_ = c.Close()
		g.Expect(status).To(Equal(http.StatusBadGateway))
	})

	t.Run("When told to refuse, it should answer every CONNECT with that status", func(t *testing.T) {
		g := NewWithT(t)
		p.Refuse(http.StatusForbidden)
		defer p.Refuse(0)
		status, c := connect(g, p, http.MethodConnect, "echo.onion:"+echoPort, "")
		_ = c.Close()
		g.Expect(status).To(Equal(http.StatusForbidden))
	})

	t.Run("When sent anything but CONNECT, it should answer 405", func(t *testing.T) {
		g := NewWithT(t)
		status, c := connect(g, p, http.MethodGet, "echo.onion:"+echoPort, "")
		_ = c.Close()
		g.Expect(status).To(Equal(http.StatusMethodNotAllowed))
	})

	t.Run("When closed, it should refuse connections", func(t *testing.T) {
		g := NewWithT(t)
		p.Close()
		_, err := net.Dial("tcp", p.Addr())
		g.Expect(err).To(HaveOccurred())
	})
}
