package auth

import (
	"errors"
	"net"
	"testing"
)

func handshake(t *testing.T, clientSecret, serverSecret string) (clientErr, serverErr error) {
	t.Helper()
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() {
		err := Server(b, nil, []byte(serverSecret))
		b.Close()
		done <- err
	}()
	clientErr = Client(a, []byte(clientSecret))
	a.Close()
	return clientErr, <-done
}

func TestHandshake(t *testing.T) {
	cases := map[string]struct {
		client, server string
		ok             bool
	}{
		"same secret":      {"0123456789abcdef-job", "0123456789abcdef-job", true},
		"different secret": {"0123456789abcdef-job", "0123456789abcdef-other", false},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			ce, se := handshake(t, tc.client, tc.server)
			if tc.ok && (ce != nil || se != nil) {
				t.Fatalf("handshake failed: client %v, server %v", ce, se)
			}
			if !tc.ok {
				if !errors.Is(ce, ErrRefused) {
					t.Errorf("client error %v, want ErrRefused", ce)
				}
				if se == nil {
					t.Errorf("server accepted a peer with another secret")
				}
			}
		})
	}
}

func TestServerRefusesGarbage(t *testing.T) {
	a, b := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- Server(b, nil, []byte("0123456789abcdef")) }()
	go a.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n------------------"))
	if err := <-done; err == nil {
		t.Fatal("server accepted an HTTP request as a handshake")
	}
	a.Close()
	b.Close()
}
