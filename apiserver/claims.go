package apiserver

import (
	"errors"

	"github.com/gin-gonic/gin"

	"github.com/nbkube/nbkube/internal/domainerr"
	"github.com/nbkube/nbkube/internal/identity"
)

// claimedReason is the reason of a refusal of a user whose name another provider's user has.
const claimedReason = "name claimed by another identity provider"

// identityError is what a request is answered with when its user could not be made out: 403
// for a user whose name another provider's user has (owners are bare names: they would own
// each other's resources), logged so that admins learn of the clash; 503 for a provider that
// could not answer, whose credential may well be good.
func (s *Server) identityError(c *gin.Context, err error) error {
	var claimed *identity.ClaimedNameError
	if errors.As(err, &claimed) {
		s.logClaimed(c, claimed)
		return claimedRefusal(claimed)
	}
	s.opts.Log.Error(err, "Cannot authenticate a request", "path", c.Request.URL.Path)
	return errIdentityUnavailable
}

func (s *Server) logClaimed(c *gin.Context, claimed *identity.ClaimedNameError) {
	s.opts.Log.Info("Refused a user whose name another identity provider's user has; set a username prefix for the provider to tell them apart",
		"user", claimed.Name, "provider", claimed.Provider, "claimedBy", claimed.ClaimedBy, "path", c.Request.URL.Path)
}

func claimedRefusal(claimed *identity.ClaimedNameError) error {
	whose := "a " + claimed.ClaimedBy + " user's"
	switch claimed.ClaimedBy {
	case identity.KindToken:
		whose = "the token's user's"
	case identity.KindUsers:
		whose = "a users file user's"
	}
	return &domainerr.Error{Kind: domainerr.ErrForbidden, Reason: claimedReason,
		Message: "Forbidden: the name " + quote(claimed.Name) + " that " + claimed.Provider + " vouches for is " + whose +
			"; the administrators can give " + claimed.Provider + "'s users a username prefix"}
}

// isClaimed reports whether err refuses a user for a name another provider's user has.
func isClaimed(err error) bool {
	var claimed *identity.ClaimedNameError
	return errors.As(err, &claimed)
}
