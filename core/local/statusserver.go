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
	"unicode/utf8"

	trainer "github.com/kubeflow/trainer/v2/pkg/apis/trainer/v1alpha1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

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
	name, path             string
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
		name:   name,
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

// lastOrZero is the last status reported, or an empty one.
func (s *statusServer) lastOrZero() trainer.TrainerStatus {
	if ts := s.last(); ts != nil {
		return *ts
	}
	return trainer.TrainerStatus{}
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
	// First, as the Trainer's server checks it, before the path and the token.
	if r.ContentLength > maxStatusBody {
		answer(w, http.StatusRequestEntityTooLarge, metav1.StatusReasonRequestEntityTooLarge, "Payload too large")
		return
	}
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
		if errs := validateTrainerStatus(ts); len(errs) > 0 {
			answer(w, http.StatusUnprocessableEntity, metav1.StatusReasonInvalid, apierrors.NewInvalid(trainJobKind, s.name, errs).ErrStatus.Message)
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

// The TrainJob CRD's limits on status.trainerStatus (Trainer v2.3.0).
const (
	maxMetrics     = 256
	maxMetricChars = 64
)

var trainJobKind = schema.GroupKind{Group: trainer.GroupVersion.Group, Kind: trainer.TrainJobKind}

// validateTrainerStatus refuses what the Trainer's server has refused for it: it server-side
// applies the status, so the TrainJob CRD's schema for trainerStatus is its validation. A run
// reporting fine here must not be refused on a cluster, where one bad metric loses the report.
// The words are the apiserver's where they are clear.
func validateTrainerStatus(ts *trainer.TrainerStatus) field.ErrorList {
	p := field.NewPath("status", "trainerStatus")
	var errs field.ErrorList
	if v := ts.ProgressPercentage; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(p.Child("progressPercentage"), *v, "should be greater than or equal to 0"))
	}
	if v := ts.ProgressPercentage; v != nil && *v > 100 {
		errs = append(errs, field.Invalid(p.Child("progressPercentage"), *v, "should be less than or equal to 100"))
	}
	if v := ts.EstimatedRemainingSeconds; v != nil && *v < 0 {
		errs = append(errs, field.Invalid(p.Child("estimatedRemainingSeconds"), *v, "should be greater than or equal to 0"))
	}
	if n := len(ts.Metrics); n > maxMetrics {
		errs = append(errs, field.TooMany(p.Child("metrics"), n, maxMetrics))
	}
	for i, m := range ts.Metrics {
		mp := p.Child("metrics").Index(i)
		errs = append(errs, metricText(mp.Child("name"), m.Name)...)
		errs = append(errs, metricText(mp.Child("value"), m.Value)...)
	}
	return errs
}

// metricText checks a metric's name or value: 1 to 64 characters, counted as the CRD's
// maxLength counts them (runes, not bytes, whatever the apiserver's message says).
func metricText(p *field.Path, s string) field.ErrorList {
	switch n := utf8.RuneCountInString(s); {
	case n == 0:
		return field.ErrorList{field.Invalid(p, s, fmt.Sprintf("must be 1 to %d characters", maxMetricChars))}
	case n > maxMetricChars:
		return field.ErrorList{field.TooLong(p, s, maxMetricChars)}
	}
	return nil
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
func (r *Runner) progress(tj *trainer.TrainJob, nodes int, resumed *resumeWatch) func(trainer.TrainerStatus) {
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
		obs = withResume(obs, r.Attempt, resumed.from())
		obs.Message = obs.RunningMessage()
		r.OnProgress(obs)
	}
}
