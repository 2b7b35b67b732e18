/*
 * log.h: one line per event on stderr: "2026-11-29T13:43:30.123Z info cp: message".
 * The level is process-wide (set once by main from -v); that and the stream are
 * the module's only state.
 */
#ifndef DENV_LOG_H
#define DENV_LOG_H

enum log_level { LOG_DEBUG, LOG_INFO, LOG_WARN, LOG_ERROR };

void log_set_level(enum log_level level);
enum log_level log_get_level(void);

void log_msg(enum log_level level, const char *module, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#define log_debug(mod, ...) log_msg(LOG_DEBUG, (mod), __VA_ARGS__)
#define log_info(mod, ...)  log_msg(LOG_INFO, (mod), __VA_ARGS__)
#define log_warn(mod, ...)  log_msg(LOG_WARN, (mod), __VA_ARGS__)
#define log_error(mod, ...) log_msg(LOG_ERROR, (mod), __VA_ARGS__)

#endif
