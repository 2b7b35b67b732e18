/*
 * term.c: the one module that owns the terminal (after htop's CRT.c).
 *
 * Rules it keeps:
 *  - every exit path gives the terminal back: term_stop on the normal path
 *    (q, SIGINT, SIGTERM, SIGHUP all end the loop and come here), atexit as
 *    a net for an exit() we did not plan, and a fatal-signal handler
 *    (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) that restores the terminal
 *    with async-signal-safe calls only, before anything else, then dies of
 *    the same signal;
 *  - while curses runs, stderr goes to an anonymous file: a log line or a
 *    library warning would otherwise be painted over the screen. It is
 *    printed once the terminal is back (the fatal handler prints it too);
 *  - colour only when the terminal has it and NO_COLOR is not set; meaning
 *    never depends on colour alone (markers, bold, reverse, the bar glyphs).
 *
 * The state is file-global on purpose: a signal handler can reach nothing
 * else. Only this file touches it.
 */
#include "tui/tui.h"

#include <curses.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <term.h>
#include <termios.h>
#include <unistd.h>

/* The reset sequence written by the fatal handler: leave the alternate
 * screen, show the cursor, plain attributes, keypad off. */
#define TERM_RESET_MAX 256

enum { PAIR_OK = 1, PAIR_FAIL, PAIR_BUSY, PAIR_WARN, PAIR_TITLE };

static const int fatal_signals[] = { SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT };

static struct {
	volatile sig_atomic_t on;	/* curses owns the terminal */
	struct termios saved;		/* the modes before curses */
	int saved_stderr;		/* the real stderr while it is buffered; -1 */
	int buf_fd;			/* where stderr goes meanwhile; -1 */
	char reset[TERM_RESET_MAX];
	size_t reset_len;
	bool color;
	bool atexit_done;
	SCREEN *screen;
} T = { .saved_stderr = -1, .buf_fd = -1 };

/* ---- async-signal-safe helpers (the fatal path uses only these) ---- */

static void write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

/* Copy the buffered stderr (its last `keep` bytes) to fd. */
static void dump_buffer(int fd, size_t keep)
{
	char chunk[4096];
	off_t end, off;

	if (T.buf_fd < 0 || (end = lseek(T.buf_fd, 0, SEEK_END)) <= 0)
		return;
	off = (size_t)end > keep ? end - (off_t)keep : 0;
	while (off < end) {
		ssize_t r = pread(T.buf_fd, chunk, sizeof(chunk), off);

		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			return;
		write_all(fd, chunk, (size_t)r);
		off += r;
	}
}

static void on_fatal(int sig)
{
	static const char msg[] = "denv top: fatal signal; terminal restored\n";

	/* The terminal first: whatever happens next, the user gets a shell back. */
	if (T.on) {
		T.on = 0;
		write_all(STDOUT_FILENO, T.reset, T.reset_len);
		tcsetattr(STDIN_FILENO, TCSANOW, &T.saved);
	}
	if (T.saved_stderr >= 0) {
		dup2(T.saved_stderr, STDERR_FILENO);
		dump_buffer(STDERR_FILENO, TOP_STDERR_KEEP);
	}
	write_all(STDERR_FILENO, msg, sizeof(msg) - 1);
	/* SA_RESETHAND put the default action back: die of the same signal. */
	raise(sig);
}

static void fatal_handlers(bool install)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = install ? on_fatal : SIG_DFL;
	sa.sa_flags = install ? SA_RESETHAND : 0;
	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(fatal_signals) / sizeof(fatal_signals[0]); i++)
		sigaction(fatal_signals[i], &sa, NULL);
}

/* ---- stderr ---- */

static int buffer_stderr(struct err *e)
{
	T.buf_fd = memfd_create("denv-top-stderr", MFD_CLOEXEC);
	if (T.buf_fd < 0) {
		FILE *f = tmpfile();	/* no memfd (old kernel): an unlinked temp file */

		if (!f)
			return err_errno(e, "cannot buffer stderr");
		T.buf_fd = fcntl(fileno(f), F_DUPFD_CLOEXEC, 3);
		fclose(f);
		if (T.buf_fd < 0)
			return err_errno(e, "cannot buffer stderr");
	}
	T.saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
	if (T.saved_stderr < 0 || dup2(T.buf_fd, STDERR_FILENO) < 0) {
		err_errno(e, "cannot buffer stderr");
		if (T.saved_stderr >= 0)
			close(T.saved_stderr);
		close(T.buf_fd);
		T.saved_stderr = T.buf_fd = -1;
		return -1;
	}
	return 0;
}

static void unbuffer_stderr(void)
{
	if (T.saved_stderr < 0)
		return;
	fflush(stderr);
	dup2(T.saved_stderr, STDERR_FILENO);
	close(T.saved_stderr);
	T.saved_stderr = -1;
	dump_buffer(STDERR_FILENO, TOP_STDERR_KEEP);
	close(T.buf_fd);
	T.buf_fd = -1;
}

/* ---- curses ---- */

static void add_cap(const char *name)
{
	char *s = tigetstr((char *)name);
	size_t n;

	if (!s || s == (char *)-1)
		return;
	n = strlen(s);
	if (T.reset_len + n < sizeof(T.reset)) {
		memcpy(T.reset + T.reset_len, s, n);
		T.reset_len += n;
	}
}

static void init_colors(bool want)
{
	T.color = want && has_colors() && start_color() == OK;
	if (!T.color)
		return;
	/* -1: the terminal's own background, where supported. */
	if (use_default_colors() != OK)
		assume_default_colors(COLOR_WHITE, COLOR_BLACK);
	init_pair(PAIR_OK, COLOR_GREEN, -1);
	init_pair(PAIR_FAIL, COLOR_RED, -1);
	init_pair(PAIR_BUSY, COLOR_YELLOW, -1);
	init_pair(PAIR_WARN, COLOR_YELLOW, -1);
	init_pair(PAIR_TITLE, COLOR_BLACK, COLOR_CYAN);
}

static void atexit_stop(void)
{
	term_stop();
}

int term_start(const struct term_opts *o, struct err *e)
{
	if (T.on)
		return 0;
	if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO))
		return err_set(e, "denv top needs a terminal (use --once for a plain-text frame)");
	if (tcgetattr(STDIN_FILENO, &T.saved) < 0)
		return err_errno(e, "cannot read the terminal's modes");
	if (buffer_stderr(e) < 0)
		return -1;
	/* newterm, not initscr: initscr exits the process on failure. */
	T.screen = newterm(NULL, stdout, stdin);
	if (!T.screen) {
		unbuffer_stderr();
		return err_set(e, "cannot start curses on this terminal (TERM=%s)", getenv("TERM") ? getenv("TERM") : "");
	}
	T.reset_len = 0;
	add_cap("rmcup");
	add_cap("cnorm");
	add_cap("sgr0");
	add_cap("rmkx");
	T.on = 1;
	fatal_handlers(true);
	if (!T.atexit_done)
		T.atexit_done = atexit(atexit_stop) == 0;
	cbreak();	/* not raw: Ctrl-C stays SIGINT, which the loop turns into a clean exit */
	noecho();
	keypad(stdscr, TRUE);
	nodelay(stdscr, TRUE);
	set_escdelay(25);	/* Esc closes overlays: do not wait a second for a sequence */
	curs_set(0);
	init_colors(o->color);
	return 0;
}

void term_stop(void)
{
	if (T.on) {
		T.on = 0;
		endwin();
		delscreen(T.screen);
		T.screen = NULL;
		fatal_handlers(false);
	}
	unbuffer_stderr();
}

void term_size(int *h, int *w)
{
	getmaxyx(stdscr, *h, *w);
}

void term_resized(void)
{
	struct winsize ws;

	/* resizeterm queues a KEY_RESIZE: only call it for a real change, or
	 * handling that key would resize again forever. */
	if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_row > 0 && ws.ws_col > 0 &&
	    (ws.ws_row != LINES || ws.ws_col != COLS))
		resizeterm(ws.ws_row, ws.ws_col);
	/* Everything is redrawn from scratch: no residue of the old geometry. */
	clearok(curscr, TRUE);
}

static attr_t attr_of(int a)
{
	switch (a) {
	case TA_TITLE:
		return T.color ? COLOR_PAIR(PAIR_TITLE) : A_REVERSE;
	case TA_HEAD:
		return A_BOLD | A_UNDERLINE;
	case TA_HEAD_FOCUS:
	case TA_SELECT:
		return A_REVERSE | (a == TA_HEAD_FOCUS ? A_BOLD : 0);
	case TA_OK:
		return T.color ? COLOR_PAIR(PAIR_OK) : A_NORMAL;
	case TA_FAIL:
		return A_BOLD | (T.color ? COLOR_PAIR(PAIR_FAIL) : 0);
	case TA_BUSY:
		return T.color ? COLOR_PAIR(PAIR_BUSY) : A_NORMAL;
	case TA_DIM:
		return A_DIM;
	case TA_WARN:
		return A_BOLD | (T.color ? COLOR_PAIR(PAIR_WARN) : 0);
	default:
		return A_NORMAL;
	}
}

void term_draw(const struct tui_frame *f)
{
	int h, w;

	if (!T.on)
		return;
	term_size(&h, &w);
	erase();
	for (int y = 0; y < f->h && y < h; y++) {
		const char *row = f->ch + (size_t)y * (size_t)f->w;
		const unsigned char *at = f->at + (size_t)y * (size_t)f->w;
		int n = f->w < w ? f->w : w;

		for (int x = 0; x < n;) {
			int run = 1;

			while (x + run < n && at[x + run] == at[x])
				run++;
			attrset(attr_of(at[x]));
			/* The bottom-right cell reports ERR (the cursor cannot move past
			 * it) yet is drawn: nothing to handle. */
			mvaddnstr(y, x, row + x, run);
			x += run;
		}
	}
	attrset(A_NORMAL);
	refresh();
}

int term_key(void)
{
	int c = getch();

	switch (c) {
	case ERR:
		return TK_NONE;
	case KEY_UP:
		return TK_UP;
	case KEY_DOWN:
		return TK_DOWN;
	case KEY_LEFT:
		return TK_LEFT;
	case KEY_RIGHT:
		return TK_RIGHT;
	case KEY_PPAGE:
		return TK_PGUP;
	case KEY_NPAGE:
		return TK_PGDN;
	case KEY_HOME:
		return TK_HOME;
	case KEY_END:
		return TK_END;
	case '\t':
		return TK_TAB;
	case KEY_BTAB:
		return TK_BTAB;
	case '\n':
	case '\r':
	case KEY_ENTER:
		return TK_ENTER;
	case KEY_BACKSPACE:
	case 127:
	case 8:
		return TK_BACKSPACE;
	case 27:
		return TK_ESC;
	case KEY_RESIZE:
		return TK_RESIZE;
	default:
		return c >= 0 && c < 256 ? c : TK_NONE;
	}
}
