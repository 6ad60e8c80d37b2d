package controllers

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/dtnflow/dtnflow/controllers/metrics"
)

// TestMetricsEndpointAuth serves the manager's metrics as --metrics-secure does
// (HTTPS, metrics.AuthFilter) against the real API server, and scrapes it as nobody, as
// a forged token, as a ServiceAccount with no grant and as one bound to a ClusterRole
// that allows get on /metrics: only the last reads metrics. (The filter stands in for
// controller-runtime's filters.WithAuthenticationAndAuthorization, which would take the
// manager from 47.0 to 78.0 MB and 818 to 1073 packages: k8s.io/apiserver and its
// OpenTelemetry SDK; see controllers/metrics/secure.go.)
func TestMetricsEndpointAuth(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cs := kubernetes.NewForConfigOrDie(env.Config)
	ns := createNamespace(t, nil)
	token := func(sa string) string {
		t.Helper()
		if _, err := cs.CoreV1().ServiceAccounts(ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: new(int64(600))}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("a token for %s: %v", sa, err)
		}
		return tr.Status.Token
	}
	scraper, stranger := token("scraper"), token("stranger")
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}}}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
		_ = cs.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	httpClient, err := rest.HTTPClientFor(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(metricsserver.Options{BindAddress: addr, SecureServing: true, FilterProvider: metrics.AuthFilter,
		CertDir: t.TempDir()}, env.Config, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Start(ctx) }()

	// the server's certificate is self-signed (no certificate mounted): this test
	// checks who may read, not the certificate
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	scrape := func(g Gomega, token string) (int, string) {
		req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
		g.Expect(err).NotTo(HaveOccurred())
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := client.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	eventually(t, func(g Gomega) { // the server is up
		code, _ := scrape(g, "")
		g.Expect(code).To(Equal(http.StatusUnauthorized))
	})
	g := NewWithT(t)
	code, _ := scrape(g, "forged."+strings.Repeat("x", 40))
	g.Expect(code).To(Equal(http.StatusUnauthorized), "a forged token")
	code, body := scrape(g, stranger)
	g.Expect(code).To(Equal(http.StatusForbidden), "a ServiceAccount with no grant")
	g.Expect(body).To(ContainSubstring("system:serviceaccount:" + ns + ":stranger"))
	code, body = scrape(g, scraper)
	g.Expect(code).To(Equal(http.StatusOK), "the granted ServiceAccount: %s", body)
	g.Expect(body).To(ContainSubstring("# HELP"))
	// a cached answer is for its own token only
	code, _ = scrape(g, stranger)
	g.Expect(code).To(Equal(http.StatusForbidden), "the stranger again, after an allowed scrape")
}
