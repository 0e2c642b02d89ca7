package identity

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"golang.org/x/oauth2"
)

// DefaultJupyterHubOAuthClientID is the OAuth client id JupyterHub gives the service named
// "nbkube": a service's client id is "service-<name>".
const DefaultJupyterHubOAuthClientID = "service-nbkube"

// oauthConfig is nbkube as an OAuth client of the Hub, as JupyterHub registers any service with
// an oauth_redirect_uri: the client id is the service's, its secret the service's API token.
// The Hub reads the client's credentials from the token request's form only (oauthlib's
// request parameters, not an Authorization header), so they go there, as JupyterHub's own
// HubOAuth sends them.
func (p *JupyterHub) oauthConfig(redirectURL string) *oauth2.Config {
	return &oauth2.Config{
		ClientID:     p.o.OAuthClientID,
		ClientSecret: p.o.ServiceToken,
		RedirectURL:  redirectURL,
		Endpoint: oauth2.Endpoint{
			AuthURL:   p.o.AuthorizeURL,
			TokenURL:  p.api + "/oauth2/token",
			AuthStyle: oauth2.AuthStyleInParams,
		},
	}
}

// LoginURL is the Hub's authorization endpoint (AuthorizeURL), asked for a code for
// redirectURL with state. No scopes are asked for: the Hub then grants its default, which is
// who the user is and access to the service, all nbkube needs.
//
// The PKCE challenge of verifier is sent, but JupyterHub 3.0 does not check it: its OAuth
// provider keeps no challenge with the code, and oauthlib checks a verifier only against a
// kept challenge. A code is still bound to nbkube by the client secret the exchange needs, and
// a Hub that comes to check PKCE finds it there.
func (p *JupyterHub) LoginURL(redirectURL, state, verifier string) string {
	var opts []oauth2.AuthCodeOption
	if verifier != "" {
		opts = append(opts, oauth2.S256ChallengeOption(verifier))
	}
	return p.oauthConfig(redirectURL).AuthCodeURL(state, opts...)
}

// FinishLogin exchanges the code at the Hub's token endpoint (APIURL + "/oauth2/token", from
// nbkube to the Hub) and asks the Hub whose access token it got, as AuthenticateToken does.
// The Hub refuses a code used before, one given for another client, and a redirectURL other
// than the service's registered oauth_redirect_uri: those errors are not ErrUnavailable. A Hub
// that does not answer, fails, or refuses nbkube's own client credentials is ErrUnavailable.
func (p *JupyterHub) FinishLogin(ctx context.Context, redirectURL, code, verifier string) (*Login, error) {
	if code == "" {
		return nil, errors.New("the Hub's OAuth callback carried no code")
	}
	var opts []oauth2.AuthCodeOption
	if verifier != "" {
		opts = append(opts, oauth2.VerifierOption(verifier))
	}
	xctx, cancel := context.WithTimeout(context.WithValue(ctx, oauth2.HTTPClient, p.o.Client), p.o.Timeout)
	defer cancel()
	tok, err := p.oauthConfig(redirectURL).Exchange(xctx, code, opts...)
	if err != nil {
		return nil, exchangeError(err)
	}
	if tok.AccessToken == "" {
		return nil, fmt.Errorf("%w: the Hub's token answer has no access token", ErrUnavailable)
	}
	u, err := p.AuthenticateToken(ctx, tok.AccessToken)
	if err != nil {
		return nil, err
	}
	if u == nil {
		return nil, errors.New("the Hub does not know the user of the access token it issued")
	}
	return &Login{User: u, Token: tok.AccessToken, Expiry: tok.Expiry}, nil
}

// exchangeError says why the Hub did not give a token, without the Hub's answer: the
// RetrieveError's own message carries the body, which is the Hub's to word. Only the OAuth
// error code (a word of RFC 6749's) and the status are kept.
func exchangeError(err error) error {
	var re *oauth2.RetrieveError
	if !errors.As(err, &re) {
		// The transport's errors name the token URL, which holds no secret; the code and
		// the client secret travel in the request's body.
		return fmt.Errorf("%w: the Hub's token endpoint: %w", ErrUnavailable, err)
	}
	status := 0
	if re.Response != nil {
		status = re.Response.StatusCode
	}
	switch {
	case re.ErrorCode == "invalid_client", re.ErrorCode == "unauthorized_client",
		status >= http.StatusInternalServerError, status < http.StatusBadRequest:
		// nbkube's own registration is wrong, or the Hub failed: not the user's doing.
		return fmt.Errorf("%w: the Hub's token endpoint answered %d %s", ErrUnavailable, status, oauthErrorCode(re))
	default:
		return fmt.Errorf("the Hub refused the login's code: %d %s", status, oauthErrorCode(re))
	}
}

// oauthErrorCode is the answer's OAuth error code when it is one of RFC 6749's words, so
// that nothing the Hub put there is echoed.
func oauthErrorCode(re *oauth2.RetrieveError) string {
	switch re.ErrorCode {
	case "invalid_request", "invalid_client", "invalid_grant", "unauthorized_client",
		"unsupported_grant_type", "invalid_scope":
		return re.ErrorCode
	case "":
		return "(no OAuth error code)"
	default:
		return "(another OAuth error code)"
	}
}

var _ BrowserProvider = (*JupyterHub)(nil)
