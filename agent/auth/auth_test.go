package auth

import (
	"errors"
	"net"
	"testing"
)

func handshake(t *testing.T, clientSecret, serverSecret string) (clientErr, serverErr error) {
	t.Helper()
	_, _, clientErr, serverErr = handshakeKeys(t, clientSecret, serverSecret)
	return clientErr, serverErr
}

func handshakeKeys(t *testing.T, clientSecret, serverSecret string) (ck, sk Keys, clientErr, serverErr error) {
	t.Helper()
	a, b := net.Pipe()
	type res struct {
		k   Keys
		err error
	}
	done := make(chan res, 1)
	go func() {
		k, err := Server(b, nil, []byte(serverSecret))
		b.Close()
		done <- res{k, err}
	}()
	ck, clientErr = Client(a, []byte(clientSecret))
	a.Close()
	r := <-done
	return ck, r.k, clientErr, r.err
}

// TestSessionKeys: both ends derive the same keys, the two directions differ, and two
// connections with the same secret never share keys (fresh nonces).
func TestSessionKeys(t *testing.T) {
	const secret = "0123456789abcdef-job"
	ck, sk, ce, se := handshakeKeys(t, secret, secret)
	if ce != nil || se != nil {
		t.Fatal(ce, se)
	}
	if ck != sk {
		t.Fatal("client and server derived different keys")
	}
	if ck.ClientToServer == ck.ServerToClient {
		t.Fatal("both directions share a key")
	}
	ck2, _, _, _ := handshakeKeys(t, secret, secret)
	if ck2.ClientToServer == ck.ClientToServer || ck2.ServerToClient == ck.ServerToClient {
		t.Fatal("two connections share a session key")
	}
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
	go func() {
		_, err := Server(b, nil, []byte("0123456789abcdef"))
		done <- err
	}()
	go a.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n------------------"))
	if err := <-done; err == nil {
		t.Fatal("server accepted an HTTP request as a handshake")
	}
	a.Close()
	b.Close()
}
