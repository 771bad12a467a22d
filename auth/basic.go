package auth

import (
	"bufio"
	"bytes"
	"crypto/md5"
	"crypto/subtle"
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/isobar-mq/isobar/errkind"
)

// BasicMethod is the auth_method_name of user-and-password credentials in
// CONNECT (pulsar-client-go's AuthenticationBasic: the data is
// "user:password"); over HTTP they come as "Authorization: Basic ...".
const BasicMethod = "basic"

// apr1Magic starts a password hash in Apache's MD5-crypt scheme, the one
// `htpasswd -m` (and `openssl passwd -apr1`) writes and Pulsar's
// AuthenticationProviderBasic reads.
const apr1Magic = "$apr1$"

// basicUsers are the users of a basic-authentication file and their
// password hashes.
type basicUsers map[string]string

// readBasicUsers reads an htpasswd-style file: one "user:hash" a line,
// blank lines and lines starting with # ignored. Every hash must be in
// the $apr1$ scheme; each problem is named by its line.
func readBasicUsers(path string) (basicUsers, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("auth.basicAuthFile: %w", err)
	}
	return parseBasicUsers(path, b)
}

func parseBasicUsers(name string, b []byte) (basicUsers, error) {
	users := basicUsers{}
	var errs []error
	sc := bufio.NewScanner(bytes.NewReader(b))
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, hash, ok := strings.Cut(line, ":")
		switch {
		case !ok:
			errs = append(errs, fmt.Errorf("%s:%d: want user:hash", name, n))
		case ValidRole(user) != nil || strings.ContainsRune(user, ':'):
			errs = append(errs, fmt.Errorf("%s:%d: user %q: %v", name, n, truncate(user, 64), ValidRole(user)))
		case !validAPR1(hash):
			errs = append(errs, fmt.Errorf("%s:%d: user %s: the hash is not an Apache MD5 hash ($apr1$salt$hash, as htpasswd -m writes); no other scheme is read", name, n, user))
		case users[user] != "":
			errs = append(errs, fmt.Errorf("%s:%d: user %s appears twice", name, n, user))
		default:
			users[user] = hash
		}
	}
	if err := sc.Err(); err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", name, err))
	}
	if len(errs) == 0 && len(users) == 0 {
		errs = append(errs, fmt.Errorf("%s: no users", name))
	}
	if len(errs) > 0 {
		return nil, fmt.Errorf("auth.basicAuthFile: %w", errors.Join(errs...))
	}
	return users, nil
}

// check verifies "user:password" and returns the user, who is the role.
func (u basicUsers) check(data string) (string, error) {
	user, password, ok := strings.Cut(data, ":")
	if !ok {
		return "", fmt.Errorf("%w: basic credentials are user:password", errkind.ErrAuthentication)
	}
	hash, known := u[user]
	if !known {
		// The same work as for a known user, so that timing does not tell
		// which users exist.
		apr1(password, "00000000")
		return "", fmt.Errorf("%w: wrong user or password", errkind.ErrAuthentication)
	}
	salt, _, _ := strings.Cut(strings.TrimPrefix(hash, apr1Magic), "$")
	if subtle.ConstantTimeCompare([]byte(apr1(password, salt)), []byte(hash)) != 1 {
		return "", fmt.Errorf("%w: wrong user or password", errkind.ErrAuthentication)
	}
	return user, nil
}

// validAPR1 reports whether h has the shape $apr1$<salt, 1-8>$<22 chars>.
func validAPR1(h string) bool {
	rest, ok := strings.CutPrefix(h, apr1Magic)
	if !ok {
		return false
	}
	salt, sum, ok := strings.Cut(rest, "$")
	if !ok || len(salt) == 0 || len(salt) > 8 || len(sum) != 22 {
		return false
	}
	for _, c := range salt + sum {
		if !strings.ContainsRune(cryptAlphabet, c) {
			return false
		}
	}
	return true
}

// cryptAlphabet is the 64 characters of crypt's base-64 encoding.
const cryptAlphabet = "./0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// apr1 is Apache's MD5-crypt of password with salt (at most 8
// characters are used): "$apr1$" + salt + "$" + 22 characters. The scheme
// is Poul-Henning Kamp's MD5-crypt with Apache's magic string: a digest of
// password, magic and salt, stretched by 1,000 rounds that mix in the
// password, the salt and the previous digest in a fixed pattern.
func apr1(password, salt string) string {
	if len(salt) > 8 {
		salt = salt[:8]
	}
	pw := []byte(password)

	alt := md5.New()
	alt.Write(pw)
	alt.Write([]byte(salt))
	alt.Write(pw)
	altSum := alt.Sum(nil)

	h := md5.New()
	h.Write(pw)
	h.Write([]byte(apr1Magic))
	h.Write([]byte(salt))
	for n := len(pw); n > 0; n -= 16 {
		h.Write(altSum[:min(n, 16)])
	}
	for n := len(pw); n > 0; n >>= 1 {
		if n&1 == 1 {
			h.Write([]byte{0})
		} else {
			h.Write(pw[:1])
		}
	}
	sum := h.Sum(nil)

	for i := range 1000 {
		r := md5.New()
		if i&1 == 1 {
			r.Write(pw)
		} else {
			r.Write(sum)
		}
		if i%3 != 0 {
			r.Write([]byte(salt))
		}
		if i%7 != 0 {
			r.Write(pw)
		}
		if i&1 == 1 {
			r.Write(sum)
		} else {
			r.Write(pw)
		}
		sum = r.Sum(sum[:0])
	}

	var out strings.Builder
	out.WriteString(apr1Magic)
	out.WriteString(salt)
	out.WriteByte('$')
	put := func(v uint32, n int) {
		for range n {
			out.WriteByte(cryptAlphabet[v&0x3f])
			v >>= 6
		}
	}
	// The digest's bytes in crypt's order: three at a time, the last alone.
	for _, g := range [][3]int{{0, 6, 12}, {1, 7, 13}, {2, 8, 14}, {3, 9, 15}, {4, 10, 5}} {
		put(uint32(sum[g[0]])<<16|uint32(sum[g[1]])<<8|uint32(sum[g[2]]), 4)
	}
	put(uint32(sum[11]), 2)
	return out.String()
}
