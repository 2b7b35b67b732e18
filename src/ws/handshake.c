/* handshake.c: Sec-WebSocket-Key / -Accept and ws:// URLs. See ws.h. */
#include "ws/ws.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/evp.h>

#include "base/str.h"

/* RFC 6455 1.3: the GUID every server appends to the key. */
static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

static bool is_b64(char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '+' || c == '/';
}

bool ws_key_valid(const char *key)
{
	/* 16 bytes in base64: 22 characters and "==". */
	if (!key || strlen(key) != WS_KEY_LEN)
		return false;
	for (int i = 0; i < 22; i++)
		if (!is_b64(key[i]))
			return false;
	return key[22] == '=' && key[23] == '=';
}

int ws_accept_for_key(const char *key, char out[WS_ACCEPT_LEN + 1], struct err *e)
{
	unsigned char md[EVP_MAX_MD_SIZE];
	unsigned int mdlen = 0;
	EVP_MD_CTX *ctx = EVP_MD_CTX_new();
	int ok;

	if (!ctx)
		return err_set(e, "websocket: out of memory for SHA-1");
	ok = EVP_DigestInit_ex(ctx, EVP_sha1(), NULL) == 1 &&
	     EVP_DigestUpdate(ctx, key, strlen(key)) == 1 &&
	     EVP_DigestUpdate(ctx, ws_guid, sizeof(ws_guid) - 1) == 1 &&
	     EVP_DigestFinal_ex(ctx, md, &mdlen) == 1 && mdlen == 20;
	EVP_MD_CTX_free(ctx);
	if (!ok)
		return err_set(e, "websocket: SHA-1 failed in libcrypto");
	/* 20 bytes encode to exactly 28 characters plus the NUL EVP writes. */
	if (EVP_EncodeBlock((unsigned char *)out, md, 20) != WS_ACCEPT_LEN)
		return err_set(e, "websocket: base64 failed in libcrypto");
	return 0;
}

int ws_make_key(char out[WS_KEY_LEN + 1], struct err *e)
{
	unsigned char raw[16];
	size_t got = 0;

	while (got < sizeof(raw)) {
		ssize_t n = getrandom(raw + got, sizeof(raw) - got, 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return err_errno(e, "websocket: getrandom");
		}
		got += (size_t)n;
	}
	EVP_EncodeBlock((unsigned char *)out, raw, sizeof(raw));
	return 0;
}

int ws_parse_url(const char *url, struct ws_url *u, struct err *e)
{
	const char *p, *host, *host_end, *port_s = NULL, *port_end = NULL, *path;
	size_t hl;

	memset(u, 0, sizeof(*u));
	if (strlen(url) >= WS_MAX_URL)
		return err_set(e, "websocket URL is longer than %d bytes", WS_MAX_URL - 1);
	if (str_has_prefix(url, "ws://")) {
		p = url + 5;
		u->port = 80;
	} else if (str_has_prefix(url, "wss://")) {
		p = url + 6;
		u->tls = true;
		u->port = 443;
	} else {
		return err_set(e, "websocket URL \"%s\" must start with ws:// or wss://", url);
	}
	path = p + strcspn(p, "/?#");
	if (*path == '#')
		return err_set(e, "websocket URL \"%s\" must not have a fragment", url);
	if (memchr(p, '@', (size_t)(path - p)))
		return err_set(e, "websocket URL \"%s\": user info is not supported", url);
	host = p;
	if (*p == '[') {
		host = p + 1;
		host_end = memchr(host, ']', (size_t)(path - host));
		if (!host_end)
			return err_set(e, "websocket URL \"%s\": unclosed [ in host", url);
		if (host_end[1] == ':') {
			port_s = host_end + 2;
			port_end = path;
		} else if (host_end + 1 != path) {
			return err_set(e, "websocket URL \"%s\": junk after ]", url);
		}
	} else {
		host_end = memchr(p, ':', (size_t)(path - p));
		if (host_end) {
			port_s = host_end + 1;
			port_end = path;
		} else {
			host_end = path;
		}
	}
	hl = (size_t)(host_end - host);
	if (hl == 0)
		return err_set(e, "websocket URL \"%s\" has no host", url);
	if (hl > WS_MAX_HOST)
		return err_set(e, "websocket URL \"%s\": host name too long", url);
	memcpy(u->host, host, hl);
	u->host[hl] = '\0';
	if (port_s) {
		char tmp[8];
		int port;
		size_t pl = (size_t)(port_end - port_s);
		if (pl == 0 || pl >= sizeof(tmp))
			return err_set(e, "websocket URL \"%s\": bad port", url);
		memcpy(tmp, port_s, pl);
		tmp[pl] = '\0';
		if (str_to_int(tmp, &port) < 0 || port < 1 || port > 65535)
			return err_set(e, "websocket URL \"%s\": bad port \"%s\"", url, tmp);
		u->port = (uint16_t)port;
	}
	if (*path == '\0') {
		u->path[0] = '/';
	} else if (*path == '?') {
		u->path[0] = '/';
		str_copy(u->path + 1, sizeof(u->path) - 1, path);
	} else {
		str_copy(u->path, sizeof(u->path), path);
	}
	for (const char *c = u->path; *c; c++)
		if ((unsigned char)*c <= ' ' || *c == 0x7F)
			return err_set(e, "websocket URL \"%s\": spaces or control characters in the path", url);
	return 0;
}
