package local

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/trainstep/trainstep/core/trainjob"
)

// The env the Trainer's TrainJobStatus plugin injects into every trainer container (Trainer
// v2.2+, feature gate TrainJobStatus): the local run injects the same, pointing at its own server.
const (
	EnvStatusURL    = "KUBEFLOW_TRAINER_SERVER_URL"
	EnvStatusCACert = "KUBEFLOW_TRAINER_SERVER_CA_CERT"
	EnvStatusToken  = "KUBEFLOW_TRAINER_SERVER_TOKEN"
)

// maxStatusBody is the Trainer status server's limit on a request (64 KiB).
const maxStatusBody = 1 << 16

// statusServer is the local stand-in for the Trainer's status server: the same path, HTTPS with
// a CA of its own, a bearer token, the same request and answers, so a function that reports
// progress through the Kubeflow SDK or a plain HTTPS POST behaves as on a cluster. What it is
// told becomes the TrainJob's status.trainerStatus, as the Trainer's server applies it.
type statusServer struct {
	url, caFile, tokenFile string
	token                  string
	path                   string
	srv                    *http.Server
	ln                     net.Listener

	mu     sync.Mutex
	status *trainer.TrainerStatus
	notify func(trainer.TrainerStatus)
}

// startStatusServer serves TrainJob ns/name's status endpoint on 127.0.0.1, with its CA and
// token written in dir; notify is called with each status it accepts.
func startStatusServer(dir, ns, name string, notify func(trainer.TrainerStatus)) (*statusServer, error) {
	cert, caPEM, err := selfSigned()
	if err != nil {
		return nil, fmt.Errorf("making the local status server's certificate: %w", err)
	}
	tok := make([]byte, 32)
	if _, err := rand.Read(tok); err != nil {
		return nil, err
	}
	s := &statusServer{
		caFile: filepath.Join(dir, "status-ca.crt"), tokenFile: filepath.Join(dir, "status-token"),
		token:  hex.EncodeToString(tok),
		path:   fmt.Sprintf("/apis/trainer.kubeflow.org/v1alpha1/namespaces/%s/trainjobs/%s/status", ns, name),
		notify: notify,
	}
	if err := os.WriteFile(s.caFile, caPEM, 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(s.tokenFile, []byte(s.token), 0o600); err != nil {
		return nil, err
	}
	s.ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listening for the local status server: %w", err)
	}
	s.url = fmt.Sprintf("https://127.0.0.1:%d%s", s.ln.Addr().(*net.TCPAddr).Port, s.path)
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = s.srv.ServeTLS(s.ln, "", "") }()
	return s, nil
}

// env is what each node gets, named as the Trainer names it.
func (s *statusServer) env() map[string]string {
	return map[string]string{EnvStatusURL: s.url, EnvStatusCACert: s.caFile, EnvStatusToken: s.tokenFile}
}

func (s *statusServer) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = s.srv.Shutdown(ctx)
}

// last is the status as last applied, or nil.
func (s *statusServer) last() *trainer.TrainerStatus {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.status == nil {
		return nil
	}
	return s.status.DeepCopy()
}

func (s *statusServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != s.path {
		answer(w, http.StatusNotFound, metav1.StatusReasonNotFound, "Not found")
		return
	}
	fields := strings.Fields(r.Header.Get("Authorization"))
	if len(fields) != 2 || !strings.EqualFold(fields[0], "Bearer") || subtle.ConstantTimeCompare([]byte(fields[1]), []byte(s.token)) != 1 {
		answer(w, http.StatusForbidden, metav1.StatusReasonForbidden, "Forbidden")
		return
	}
	var req trainer.UpdateTrainJobStatusRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxStatusBody)).Decode(&req); err != nil {
		answer(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, "Invalid payload")
		return
	}
	if ts := req.TrainerStatus; ts != nil {
		if p := ts.ProgressPercentage; p != nil && (*p < 0 || *p > 100) {
			answer(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid,
				fmt.Sprintf("status.trainerStatus.progressPercentage: Invalid value: %d: must be between 0 and 100", *p))
			return
		}
		// Replaced whole, as the Trainer's server-side apply (one field manager) does: a field the
		// request leaves out is dropped, not kept from the last one.
		s.mu.Lock()
		s.status = ts.DeepCopy()
		applied := *ts.DeepCopy()
		s.mu.Unlock()
		if s.notify != nil {
			s.notify(applied)
		}
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(req)
}

func answer(w http.ResponseWriter, code int, reason metav1.StatusReason, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(metav1.Status{Status: metav1.StatusFailure, Message: msg, Reason: reason, Code: int32(code)})
}

// selfSigned is a serving certificate for 127.0.0.1 and localhost that is its own CA.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "trainstep local status server"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
		IPAddresses:           []net.IP{net.ParseIP("127.0.0.1")},
		DNSNames:              []string{"localhost"},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}))
	if err != nil {
		return tls.Certificate{}, nil, errors.Join(errors.New("pairing the local status server's key"), err)
	}
	return cert, certPEM, nil
}

// progress is what the status server calls with each status it accepts: the run as a cluster
// face would show it, every node running.
func (r *Runner) progress(tj *trainer.TrainJob, nodes int) func(trainer.TrainerStatus) {
	if r.OnProgress == nil {
		return nil
	}
	base := tj.DeepCopy()
	return func(ts trainer.TrainerStatus) {
		snap := base.DeepCopy()
		snap.Status.TrainerStatus = &ts
		obs := trainjob.Observe(snap, nil)
		obs.Phase, obs.Reason = trainjob.PhaseRunning, "Running"
		obs.NumNodes, obs.RunningNodes = int32(nodes), int32(nodes)
		obs.Message = obs.RunningMessage()
		r.OnProgress(obs)
	}
}
