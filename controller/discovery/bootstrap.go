package discovery

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/coxswain-labs/coxswain/core/discovery/svid"
	discv1 "github.com/coxswain-labs/coxswain/core/discovery/v1"
)

// Authenticator checks a bootstrap token and names the ServiceAccount it was issued to. An error
// wrapping ErrUnauthenticated means the token is not good; any other error, that it could not be
// checked.
type Authenticator func(ctx context.Context, token string) (namespace, serviceAccount string, err error)

// ErrUnauthenticated is wrapped by an Authenticator's error for a token that is not accepted.
var ErrUnauthenticated = errors.New("token not accepted")

const saUserPrefix = "system:serviceaccount:"

// TokenReviewAuthenticator checks tokens with the API server's TokenReview, accepting only
// ServiceAccount tokens issued for audience.
func TokenReviewAuthenticator(kube kubernetes.Interface, audience string) Authenticator {
	return func(ctx context.Context, token string) (string, string, error) {
		tr, err := kube.AuthenticationV1().TokenReviews().Create(ctx, &authenticationv1.TokenReview{
			Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: []string{audience}},
		}, metav1.CreateOptions{})
		if err != nil {
			return "", "", fmt.Errorf("TokenReview: %w", err)
		}
		st := tr.Status
		if !st.Authenticated {
			return "", "", fmt.Errorf("%w: %s", ErrUnauthenticated, orDefault(st.Error, "not authenticated"))
		}
		if !slices.Contains(st.Audiences, audience) {
			return "", "", fmt.Errorf("%w: not issued for audience %q", ErrUnauthenticated, audience)
		}
		rest, ok := strings.CutPrefix(st.User.Username, saUserPrefix)
		ns, sa, ok2 := strings.Cut(rest, ":")
		if !ok || !ok2 || ns == "" || sa == "" {
			return "", "", fmt.Errorf("%w: %q is not a ServiceAccount", ErrUnauthenticated, st.User.Username)
		}
		return ns, sa, nil
	}
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// bootstrap is the BootstrapService: it turns a ServiceAccount token into an SVID.
type bootstrap struct {
	discv1.UnimplementedBootstrapServiceServer
	log     *zap.Logger
	ca      *CA
	auth    Authenticator
	ttl     time.Duration
	metrics *metrics
	// reviews bounds the TokenReviews in flight, so a flood of bootstrap requests cannot turn
	// into a flood of API server requests.
	reviews chan struct{}
}

// maxConcurrentReviews is the most TokenReviews the bootstrap endpoint runs at once.
const maxConcurrentReviews = 16

var _ discv1.BootstrapServiceServer = (*bootstrap)(nil)

// maxTokenBytes bounds a bootstrap token; projected tokens are about 1 KiB.
const maxTokenBytes = 16 << 10

func (b *bootstrap) IssueCertificate(ctx context.Context, req *discv1.IssueCertificateRequest) (*discv1.IssueCertificateResponse, error) {
	if req.GetToken() == "" || len(req.GetToken()) > maxTokenBytes {
		b.metrics.refused("bootstrap_bad_request")
		b.log.Warn("bootstrap refused", zap.String("reason", "bootstrap_bad_request"), zap.String("peer", peerAddr(ctx)),
			zap.Int("tokenBytes", len(req.GetToken())), zap.String("error", "no ServiceAccount token, or one over 16 KiB"))
		return nil, status.Error(codes.InvalidArgument, "a ServiceAccount token is required")
	}
	select {
	case b.reviews <- struct{}{}:
		defer func() { <-b.reviews }()
	default:
		b.metrics.refused("bootstrap_busy")
		return nil, status.Error(codes.ResourceExhausted, "too many bootstrap requests at once; try again")
	}
	ns, sa, err := b.auth(ctx, req.GetToken())
	if err != nil {
		if errors.Is(err, ErrUnauthenticated) {
			b.metrics.refused("bootstrap_token")
			b.log.Warn("bootstrap refused", zap.String("reason", "bootstrap_token"), zap.String("peer", peerAddr(ctx)), zap.Error(err))
			return nil, status.Error(codes.Unauthenticated, err.Error())
		}
		b.log.Error("checking a bootstrap token", zap.Error(err))
		return nil, status.Error(codes.Unavailable, "the token could not be checked; try again")
	}
	id := svid.ID{TrustDomain: b.ca.TrustDomain(), Namespace: ns, ServiceAccount: sa}
	chain, leaf, err := b.ca.IssueSVID(req.GetCsr(), id, b.ttl)
	if err != nil {
		b.metrics.refused("bootstrap_bad_request")
		b.log.Warn("bootstrap refused", zap.String("reason", "bootstrap_bad_request"), zap.String("peer", peerAddr(ctx)), zap.Error(err))
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	b.metrics.svidsIssued.Inc()
	b.log.Info("SVID issued", zap.String("spiffeID", id.String()), zap.Time("notAfter", leaf.NotAfter))
	return &discv1.IssueCertificateResponse{CertificateChain: chain, SpiffeId: id.String(), TrustBundle: b.ca.Bundle()}, nil
}
