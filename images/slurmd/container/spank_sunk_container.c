/*
 * spank_sunk_container: `srun --container-image` with Pyxis's option names, on our own runtime.
 *
 * Where the work happens (remote context, slurmstepd):
 *   user_init               once per step and node, as root: `sunk-container prepare` pulls the
 *                           image into the node's cache and makes (or reuses) the container's
 *                           root filesystem; a failure is kept and reported by the first task.
 *   task_init_privileged    each task, as root, already in the step's cgroup: a private mount
 *                           namespace, the system, home, PMIx and user mounts (targets resolved
 *                           inside the root with openat2(RESOLVE_IN_ROOT), so an image's
 *                           symlinks cannot point a mount at the Pod's files), then chroot.
 *   task_init               each task, as the user: the image's environment, the working
 *                           directory and, with --container-remap-root, a user namespace that
 *                           maps the user to root (made before the chroot, which the kernel
 *                           requires).
 *   exit / job_epilog       the step's unnamed container goes at the end of the step, named
 *                           ones at the end of the job (container_scope=job).
 * Tasks stay slurmstepd's children, so signals, cgroup limits, accounting and PMIx behave as
 * they do for tasks on the host.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <slurm/slurm.h>
#include <slurm/spank.h>

SPANK_PLUGIN(sunk_container, 1);

#define TAG "sunk-container"
#define HELPER "/usr/local/bin/sunk-container"
#define SPOOL "/var/spool/slurmd"
#define MAX_ENV 64
#define MSG_MAX 4096

/* plugstack.conf options (Pyxis's names where Pyxis has one) */
static struct {
	char runtime_path[PATH_MAX];
	char cache_path[PATH_MAX];
	char image_cache_size[64];
	char insecure_registries[1024];
	char credentials[PATH_MAX];
	int mount_home;
	int remap_root;
	int writable;
	int scope_job;
	int sbatch_support;
	int execute_entrypoint;
	/* env=NAME=VALUE words: every task of every step gets them unless it has NAME already */
	char *env[MAX_ENV];
	int env_count;
} conf = {
	.runtime_path = "/var/lib/sunk/containers",
	.cache_path = "",
	.image_cache_size = "20G",
	.insecure_registries = "",
	.credentials = "/etc/sunk/containers/credentials/credentials",
	.mount_home = 1,
	.remap_root = 0,
	.writable = 0,
	.scope_job = 1,
	.sbatch_support = 1,
	.execute_entrypoint = 0,
};

/* a user's options; -1: not given */
static struct {
	char *image;
	char *mounts;
	char *workdir;
	char *name;
	char *env;
	int mount_home;
	int remap_root;
	int writable;
	int entrypoint;
} opt = { NULL, NULL, NULL, NULL, NULL, -1, -1, -1, -1 };

/* what `prepare` made, for the tasks of this step */
static struct {
	int active;
	char failure[MSG_MAX];
	char rootfs[PATH_MAX];
	char tmp[PATH_MAX];
	char env_file[PATH_MAX];
	char workdir[PATH_MAX];
	char home[PATH_MAX];
	char name[256];
	int unnamed;
	uid_t uid;
	gid_t gid;
	uint32_t job;
	uint32_t step;
	int rootfd;
} st = { .rootfd = -1 };

static int opt_string(char **slot, const char *flag, const char *arg)
{
	if (!arg || !*arg) {
		slurm_error("%s: --%s needs a value", TAG, flag);
		return -1;
	}
	/* Slurm may call a handler twice with one value (srun, then the job's environment) */
	if (*slot && strcmp(*slot, arg)) {
		slurm_error("%s: --%s given twice with different values", TAG, flag);
		return -1;
	}
	free(*slot);
	*slot = strdup(arg);
	return *slot ? 0 : -1;
}

static int opt_flag(int *slot, const char *flag, int value)
{
	if (*slot != -1 && *slot != value) {
		slurm_error("%s: --%s conflicts with its opposite", TAG, flag);
		return -1;
	}
	*slot = value;
	return 0;
}

enum { O_IMAGE = 1, O_MOUNTS, O_WORKDIR, O_NAME, O_ENV, O_HOME, O_NO_HOME, O_REMAP,
       O_NO_REMAP, O_WRITABLE, O_READONLY, O_ENTRY, O_NO_ENTRY };

static int on_option(int val, const char *arg, int remote)
{
	(void) remote;
	switch (val) {
	case O_IMAGE: return opt_string(&opt.image, "container-image", arg);
	case O_MOUNTS: return opt_string(&opt.mounts, "container-mounts", arg);
	case O_WORKDIR: return opt_string(&opt.workdir, "container-workdir", arg);
	case O_NAME: return opt_string(&opt.name, "container-name", arg);
	case O_ENV: return opt_string(&opt.env, "container-env", arg);
	case O_HOME: return opt_flag(&opt.mount_home, "container-mount-home", 1);
	case O_NO_HOME: return opt_flag(&opt.mount_home, "no-container-mount-home", 0);
	case O_REMAP: return opt_flag(&opt.remap_root, "container-remap-root", 1);
	case O_NO_REMAP: return opt_flag(&opt.remap_root, "no-container-remap-root", 0);
	case O_WRITABLE: return opt_flag(&opt.writable, "container-writable", 1);
	case O_READONLY: return opt_flag(&opt.writable, "container-readonly", 0);
	case O_ENTRY: return opt_flag(&opt.entrypoint, "container-entrypoint", 1);
	case O_NO_ENTRY: return opt_flag(&opt.entrypoint, "no-container-entrypoint", 0);
	}
	return -1;
}

static struct spank_option options[] = {
	{ "container-image", "[USER@][REGISTRY#]IMAGE[:TAG|@DIGEST]|PATH",
	  "[sunk-container] the image to run the tasks in (a registry reference, or a squashfs "
	  "file or OCI archive on a shared volume)", 1, O_IMAGE, on_option },
	{ "container-mounts", "SRC:DST[:FLAGS][,SRC:DST...]",
	  "[sunk-container] bind mounts into the container (FLAGS: ro, rw, nosuid, nodev, "
	  "noexec, joined with +)", 1, O_MOUNTS, on_option },
	{ "container-workdir", "PATH",
	  "[sunk-container] working directory inside the container (default: the image's)",
	  1, O_WORKDIR, on_option },
	{ "container-name", "NAME",
	  "[sunk-container] name the container: later steps of the job with this name reuse "
	  "its file system", 1, O_NAME, on_option },
	{ "container-env", "NAME[,NAME...]",
	  "[sunk-container] variables whose value from the submitting environment wins over "
	  "the image's", 1, O_ENV, on_option },
	{ "container-mount-home", NULL, "[sunk-container] mount the user's home",
	  0, O_HOME, on_option },
	{ "no-container-mount-home", NULL, "[sunk-container] do not mount the user's home",
	  0, O_NO_HOME, on_option },
	{ "container-remap-root", NULL, "[sunk-container] run as root inside the container "
	  "(a user namespace; files you create stay yours)", 0, O_REMAP, on_option },
	{ "no-container-remap-root", NULL, "[sunk-container] run as yourself inside the "
	  "container", 0, O_NO_REMAP, on_option },
	{ "container-writable", NULL, "[sunk-container] make the container's file system "
	  "writable", 0, O_WRITABLE, on_option },
	{ "container-readonly", NULL, "[sunk-container] make the container's file system "
	  "read-only", 0, O_READONLY, on_option },
	{ "container-entrypoint", NULL, "[sunk-container] run the image's entrypoint "
	  "(not supported: run it explicitly)", 0, O_ENTRY, on_option },
	{ "no-container-entrypoint", NULL, "[sunk-container] do not run the image's "
	  "entrypoint (the default)", 0, O_NO_ENTRY, on_option },
	SPANK_OPTIONS_TABLE_END
};

static int parse_bool(const char *key, const char *value, int *out)
{
	if (!strcmp(value, "1") || !strcasecmp(value, "yes") || !strcasecmp(value, "true") ||
	    !strcasecmp(value, "y")) {
		*out = 1;
		return 0;
	}
	if (!strcmp(value, "0") || !strcasecmp(value, "no") || !strcasecmp(value, "false") ||
	    !strcasecmp(value, "n")) {
		*out = 0;
		return 0;
	}
	slurm_error("%s: plugstack.conf: %s=%s is not a boolean (0 or 1)", TAG, key, value);
	return -1;
}

static int copy_value(char *dst, size_t size, const char *key, const char *value)
{
	if (strlen(value) >= size) {
		slurm_error("%s: plugstack.conf: %s is too long", TAG, key);
		return -1;
	}
	strcpy(dst, value);
	return 0;
}

static int add_env(const char *value)
{
	const char *eq = strchr(value, '=');
	size_t n = eq ? (size_t) (eq - value) : 0;
	if (!n || strspn(value, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_")
			  != n) {
		slurm_error("%s: plugstack.conf: env=%s is not env=NAME=VALUE", TAG, value);
		return -1;
	}
	if (conf.env_count == MAX_ENV) {
		slurm_error("%s: plugstack.conf: more than %d env= options", TAG, MAX_ENV);
		return -1;
	}
	conf.env[conf.env_count] = strdup(value);
	return conf.env[conf.env_count++] ? 0 : -1;
}

static int parse_config(int ac, char **av)
{
	while (conf.env_count)
		free(conf.env[--conf.env_count]);
	for (int i = 0; i < ac; i++) {
		char key[64];
		const char *eq = strchr(av[i], '=');
		if (!eq || eq == av[i] || (size_t) (eq - av[i]) >= sizeof(key)) {
			slurm_error("%s: plugstack.conf: expected KEY=VALUE, got '%s'", TAG, av[i]);
			return -1;
		}
		memcpy(key, av[i], eq - av[i]);
		key[eq - av[i]] = '\0';
		const char *v = eq + 1;
		int rc;
		if (!strcmp(key, "runtime_path"))
			rc = copy_value(conf.runtime_path, sizeof(conf.runtime_path), key, v);
		else if (!strcmp(key, "cache_path"))
			rc = copy_value(conf.cache_path, sizeof(conf.cache_path), key, v);
		else if (!strcmp(key, "image_cache_size"))
			rc = copy_value(conf.image_cache_size, sizeof(conf.image_cache_size), key, v);
		else if (!strcmp(key, "insecure_registries"))
			rc = copy_value(conf.insecure_registries, sizeof(conf.insecure_registries),
					key, v);
		else if (!strcmp(key, "env"))
			rc = add_env(v);
		else if (!strcmp(key, "credentials"))
			rc = copy_value(conf.credentials, sizeof(conf.credentials), key, v);
		else if (!strcmp(key, "mount_home"))
			rc = parse_bool(key, v, &conf.mount_home);
		else if (!strcmp(key, "remap_root"))
			rc = parse_bool(key, v, &conf.remap_root);
		else if (!strcmp(key, "writable"))
			rc = parse_bool(key, v, &conf.writable);
		else if (!strcmp(key, "sbatch_support"))
			rc = parse_bool(key, v, &conf.sbatch_support);
		else if (!strcmp(key, "execute_entrypoint"))
			rc = parse_bool(key, v, &conf.execute_entrypoint);
		else if (!strcmp(key, "container_scope")) {
			if (!strcmp(v, "job") || !strcmp(v, "global")) {
				conf.scope_job = !strcmp(v, "job");
				rc = 0;
			} else {
				slurm_error("%s: plugstack.conf: container_scope is job or global, "
					    "not '%s'", TAG, v);
				rc = -1;
			}
		} else {
			slurm_error("%s: plugstack.conf: unknown option '%s' (known: runtime_path, "
				    "cache_path, image_cache_size, insecure_registries, credentials, "
				    "mount_home, remap_root, writable, container_scope, "
				    "sbatch_support, execute_entrypoint, env)", TAG, key);
			rc = -1;
		}
		if (rc)
			return -1;
	}
	if (conf.runtime_path[0] != '/' || (conf.cache_path[0] && conf.cache_path[0] != '/')) {
		slurm_error("%s: plugstack.conf: runtime_path and cache_path must be absolute", TAG);
		return -1;
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	spank_context_t ctx = spank_context();
	if (parse_config(ac, av))
		return -1;
	if (ctx == S_CTX_ALLOCATOR && !conf.sbatch_support)
		return 0;
	if (ctx != S_CTX_LOCAL && ctx != S_CTX_REMOTE && ctx != S_CTX_ALLOCATOR)
		return 0;
	for (struct spank_option *o = options; o->name; o++) {
		if (spank_option_register(sp, o) != ESPANK_SUCCESS) {
			slurm_error("%s: cannot register --%s", TAG, o->name);
			return -1;
		}
	}
	return 0;
}

/* One --container-mounts flag: what it adds to the bind's flags; -1 when unknown. The
 * propagation and bind words are accepted as Pyxis's are: every bind here is recursive and
 * private to the task's namespace already. */
static int mount_flag(const char *word, unsigned long *flags)
{
	static const struct { const char *name; unsigned long flag; } known[] = {
		{ "ro", MS_RDONLY }, { "nosuid", MS_NOSUID }, { "nodev", MS_NODEV },
		{ "noexec", MS_NOEXEC }, { "rw", 0 }, { "bind", 0 }, { "rbind", 0 },
		{ "private", 0 }, { "rprivate", 0 }, { "slave", 0 }, { "rslave", 0 },
	};
	for (size_t i = 0; i < sizeof(known) / sizeof(known[0]); i++) {
		if (!strcmp(word, known[i].name)) {
			*flags |= known[i].flag;
			return 0;
		}
	}
	return -1;
}

/* Checks the syntax of --container-mounts (SRC:DST[:FLAGS], comma-separated); 0 when valid. */
static int check_mounts(const char *spec, char *why, size_t size)
{
	char *copy = strdup(spec), *save = NULL;
	int rc = 0;
	if (!copy)
		return -1;
	for (char *entry = strtok_r(copy, ",", &save); entry; entry = strtok_r(NULL, ",", &save)) {
		char *dst = strchr(entry, ':');
		char *flags = dst ? strchr(dst + 1, ':') : NULL;
		const char *target = dst ? dst + 1 : entry;
		if (dst)
			*dst = '\0';
		if (flags)
			*flags++ = '\0';
		if (entry[0] != '/' && entry[0] != '.') {
			snprintf(why, size, "source '%s' is not a path", entry);
			rc = -1;
			break;
		}
		if (target[0] != '/') {
			snprintf(why, size, "target '%s' is not an absolute path", target);
			rc = -1;
			break;
		}
		unsigned long ignored = 0;
		for (char *f = flags, *fs = NULL, *w = f ? strtok_r(f, "+", &fs) : NULL; w;
		     w = strtok_r(NULL, "+", &fs)) {
			if (mount_flag(w, &ignored)) {
				snprintf(why, size, "unknown mount flag '%s'", w);
				rc = -1;
				break;
			}
		}
		if (rc)
			break;
	}
	free(copy);
	return rc;
}

static int active(void)
{
	return opt.image || opt.name;
}

int slurm_spank_init_post_opt(spank_t sp, int ac, char **av)
{
	char why[256];
	(void) ac;
	(void) av;
	if (!active()) {
		if (opt.mounts || opt.workdir || opt.env || opt.writable != -1 ||
		    opt.remap_root != -1 || opt.mount_home != -1)
			slurm_error("%s: ignoring the container options: neither --container-image "
				    "nor --container-name is set", TAG);
		return 0;
	}
	if (opt.entrypoint == 1 && !conf.execute_entrypoint) {
		slurm_error("%s: --container-entrypoint is not supported here: the tasks run the "
			    "command you give (run the image's entrypoint explicitly)", TAG);
		return -1;
	}
	if (opt.mounts && check_mounts(opt.mounts, why, sizeof(why))) {
		slurm_error("%s: --container-mounts: %s", TAG, why);
		return -1;
	}
	if (opt.workdir && opt.workdir[0] != '/') {
		slurm_error("%s: --container-workdir must be an absolute path", TAG);
		return -1;
	}
	if (opt.name && (strchr(opt.name, '/') || !strcmp(opt.name, ".") ||
			 !strcmp(opt.name, "..") || strlen(opt.name) > 128)) {
		slurm_error("%s: --container-name '%s': use letters, digits, '.', '-' or '_'",
			    TAG, opt.name);
		return -1;
	}
	if (!spank_remote(sp))
		return 0;
	st.active = 1;
	if (spank_get_item(sp, S_JOB_UID, &st.uid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_GID, &st.gid) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_ID, &st.job) != ESPANK_SUCCESS ||
	    spank_get_item(sp, S_JOB_STEPID, &st.step) != ESPANK_SUCCESS) {
		slurm_error("%s: cannot read the job's ids", TAG);
		return -1;
	}
	if (st.step == SLURM_EXTERN_CONT) {
		st.active = 0;
		return 0;
	}
	if (opt.name) {
		snprintf(st.name, sizeof(st.name), "%s", opt.name);
	} else {
		snprintf(st.name, sizeof(st.name), "step-%u", st.step);
		st.unnamed = 1;
	}
	return 0;
}

/* Runs the helper as root with argv; its stdout into out (NUL-terminated, at most size-1),
 * its stderr (the reason, on failure) into err. Returns its exit status, -1 if it did not run. */
static int run_helper(char *const argv[], char *out, size_t size, char *err, size_t errsize)
{
	int pout[2], perr[2];
	if (pipe2(pout, O_CLOEXEC) || pipe2(perr, O_CLOEXEC)) {
		snprintf(err, errsize, "pipe: %s", strerror(errno));
		return -1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		snprintf(err, errsize, "fork: %s", strerror(errno));
		return -1;
	}
	if (pid == 0) {
		/* user_init runs with the user's effective ids (root's saved): root again first, which
		 * brings the capabilities back, then root's groups; the helper runs as root */
		if (setresuid(0, 0, 0) || setresgid(0, 0, 0) || setgroups(0, NULL)) {
			dprintf(perr[1], "sunk-container: cannot become root again to run %s: %s",
				argv[0], strerror(errno));
			_exit(126);
		}
		dup2(pout[1], 1);
		dup2(perr[1], 2);
		int devnull = open("/dev/null", O_RDONLY);
		if (devnull >= 0)
			dup2(devnull, 0);
		execv(argv[0], argv);
		dprintf(2, "cannot run %s: %s", argv[0], strerror(errno));
		_exit(127);
	}
	close(pout[1]);
	close(perr[1]);
	size_t n = 0, m = 0;
	/* read both to the end: stderr is short (the reason), stdout a few lines */
	for (int open_fds = 2; open_fds;) {
		open_fds = 0;
		if (pout[0] >= 0) {
			ssize_t r = read(pout[0], out + n, size - 1 - n);
			if (r > 0) {
				n += r;
				if (n >= size - 1) {
					close(pout[0]);
					pout[0] = -1;
				}
			} else {
				close(pout[0]);
				pout[0] = -1;
			}
		}
		if (perr[0] >= 0) {
			char sink[512];
			ssize_t r = m < errsize - 1 ? read(perr[0], err + m, errsize - 1 - m)
						    : read(perr[0], sink, sizeof(sink));
			if (r > 0) {
				if (m < errsize - 1)
					m += r;
			} else {
				close(perr[0]);
				perr[0] = -1;
			}
		}
		open_fds = (pout[0] >= 0) + (perr[0] >= 0);
	}
	out[n] = '\0';
	err[m] = '\0';
	while (m && (err[m - 1] == '\n' || err[m - 1] == ' '))
		err[--m] = '\0';
	int status;
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	snprintf(err + m, errsize - m, "%shelper killed by signal %d", m ? "; " : "",
		 WIFSIGNALED(status) ? WTERMSIG(status) : 0);
	return -1;
}

static void job_env(spank_t sp, const char *name, char *buf, size_t size)
{
	if (spank_getenv(sp, name, buf, size) != ESPANK_SUCCESS)
		buf[0] = '\0';
}

static int field(const char *out, const char *key, char *dst, size_t size)
{
	size_t len = strlen(key);
	for (const char *line = out; line && *line; line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
		if (!strncmp(line, key, len) && line[len] == '=') {
			const char *v = line + len + 1, *end = strchr(v, '\n');
			size_t n = end ? (size_t) (end - v) : strlen(v);
			if (n >= size)
				return -1;
			memcpy(dst, v, n);
			dst[n] = '\0';
			return 0;
		}
	}
	return -1;
}

static char *image_env;
static size_t image_env_len;

static int load_image_env(void)
{
	FILE *f = fopen(st.env_file, "re");
	if (!f)
		return -1;
	size_t cap = 4096, n = 0;
	char *buf = malloc(cap);
	for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
		n += r;
		if (n == cap) {
			char *bigger = realloc(buf, cap *= 2);
			if (!bigger) {
				free(buf);
				buf = NULL;
			}
			buf = bigger;
		}
	}
	fclose(f);
	if (!buf)
		return -1;
	image_env = buf;
	image_env_len = n;
	return 0;
}

int slurm_spank_user_init(spank_t sp, int ac, char **av)
{
	(void) ac;
	(void) av;
	if (!st.active)
		return 0;
	char job[16], step[16], uid[16], gid[16];
	char home[PATH_MAX], config_path[PATH_MAX], xdg[PATH_MAX], cwd[PATH_MAX];
	snprintf(job, sizeof(job), "%u", st.job);
	snprintf(step, sizeof(step), "%u", st.step);
	snprintf(uid, sizeof(uid), "%u", (unsigned) st.uid);
	snprintf(gid, sizeof(gid), "%u", (unsigned) st.gid);
	job_env(sp, "HOME", home, sizeof(home));
	job_env(sp, "ENROOT_CONFIG_PATH", config_path, sizeof(config_path));
	job_env(sp, "XDG_CONFIG_HOME", xdg, sizeof(xdg));
	job_env(sp, "PWD", cwd, sizeof(cwd));
	int writable = opt.writable != -1 ? opt.writable : conf.writable;
	char *argv[64];
	int n = 0;
	argv[n++] = HELPER;
	argv[n++] = "prepare";
	argv[n++] = "--runtime-path"; argv[n++] = conf.runtime_path;
	if (conf.cache_path[0]) { argv[n++] = "--cache-path"; argv[n++] = conf.cache_path; }
	argv[n++] = "--cache-size"; argv[n++] = conf.image_cache_size;
	if (conf.insecure_registries[0]) {
		argv[n++] = "--insecure-registries"; argv[n++] = conf.insecure_registries;
	}
	argv[n++] = "--system-credentials"; argv[n++] = conf.credentials;
	argv[n++] = "--job"; argv[n++] = job;
	argv[n++] = "--step"; argv[n++] = step;
	argv[n++] = "--uid"; argv[n++] = uid;
	argv[n++] = "--gid"; argv[n++] = gid;
	argv[n++] = "--name"; argv[n++] = st.name;
	if (opt.image) { argv[n++] = "--image"; argv[n++] = opt.image; }
	if (!st.unnamed && !opt.image) argv[n++] = "--existing";
	if (writable) argv[n++] = "--writable";
	if (home[0]) { argv[n++] = "--home"; argv[n++] = home; }
	if (config_path[0]) { argv[n++] = "--enroot-config-path"; argv[n++] = config_path; }
	if (xdg[0]) { argv[n++] = "--xdg-config-home"; argv[n++] = xdg; }
	if (cwd[0]) { argv[n++] = "--cwd"; argv[n++] = cwd; }
	argv[n++] = NULL;
	char out[8192], err[MSG_MAX - 64];
	int rc = run_helper(argv, out, sizeof(out), err, sizeof(err));
	if (rc != 0) {
		snprintf(st.failure, sizeof(st.failure), "%s", err[0] ? err : "sunk-container "
			 "prepare failed");
		return 0; /* reported by the first task: an error here never reaches srun */
	}
	if (field(out, "rootfs", st.rootfs, sizeof(st.rootfs)) ||
	    field(out, "tmp", st.tmp, sizeof(st.tmp)) ||
	    field(out, "env", st.env_file, sizeof(st.env_file)) ||
	    field(out, "workdir", st.workdir, sizeof(st.workdir))) {
		snprintf(st.failure, sizeof(st.failure), "sunk-container prepare gave no container "
			 "(output: %.200s)", out);
		return 0;
	}
	if (field(out, "home", st.home, sizeof(st.home)))
		st.home[0] = '\0';
	if (opt.workdir)
		snprintf(st.workdir, sizeof(st.workdir), "%s", opt.workdir);
	slurm_verbose("%s: container %s for job %u step %u at %s", TAG, st.name, st.job, st.step,
		      st.rootfs);
	return 0;
}

/* --- mounts inside the root, resolved there ------------------------------------------------ */

static int in_root(int rootfd, const char *path, int flags)
{
	struct open_how how = {
		.flags = (uint64_t) flags | O_CLOEXEC,
		.resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
	};
	while (*path == '/')
		path++;
	if (!*path)
		path = ".";
	return (int) syscall(SYS_openat2, rootfd, path, &how, sizeof(how));
}

/* Opens (creating what is missing, as directories or a final empty file) `path` inside the
 * root; O_PATH descriptor or -1 with errno. */
static int make_in_root(int rootfd, const char *path, int file)
{
	char buf[PATH_MAX];
	if (snprintf(buf, sizeof(buf), "%s", path) >= (int) sizeof(buf)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	int fd = in_root(rootfd, buf, O_PATH);
	if (fd >= 0 || errno != ENOENT)
		return fd;
	/* walk from the root, creating each missing component inside it */
	char *p = buf;
	while (*p == '/')
		p++;
	for (char *slash = p;; ) {
		slash = strchr(slash, '/');
		int last = !slash;
		if (slash)
			*slash = '\0';
		fd = in_root(rootfd, buf, O_PATH);
		if (fd < 0 && errno == ENOENT) {
			char *base = strrchr(buf, '/');
			const char *name = base ? base + 1 : buf;
			int parent;
			if (base && base != buf) {
				*base = '\0';
				parent = in_root(rootfd, buf, O_PATH | O_DIRECTORY);
				*base = '/';
			} else {
				parent = in_root(rootfd, "/", O_PATH | O_DIRECTORY);
			}
			if (parent < 0)
				return -1;
			int rc;
			if (last && file) {
				rc = openat(parent, name, O_CREAT | O_EXCL | O_WRONLY | O_NOFOLLOW |
					    O_CLOEXEC, 0644);
				if (rc >= 0)
					close(rc);
			} else {
				rc = mkdirat(parent, name, 0755);
			}
			int saved = errno;
			close(parent);
			if (rc < 0 && saved != EEXIST) {
				errno = saved;
				return -1;
			}
			fd = in_root(rootfd, buf, O_PATH);
		}
		if (fd < 0)
			return -1;
		if (last)
			return fd;
		close(fd);
		*slash = '/';
		slash++;
	}
}

static int bind_into(int rootfd, const char *src, const char *dst, unsigned long flags,
		     char *why, size_t size)
{
	struct stat sb;
	int srcfd = open(src, O_PATH | O_CLOEXEC);
	if (srcfd < 0 || fstat(srcfd, &sb)) {
		snprintf(why, size, "mount source %s: %s", src, strerror(errno));
		if (srcfd >= 0)
			close(srcfd);
		return -1;
	}
	int dstfd = make_in_root(rootfd, dst, !S_ISDIR(sb.st_mode));
	if (dstfd < 0) {
		snprintf(why, size, "mount target %s in the container: %s", dst, strerror(errno));
		close(srcfd);
		return -1;
	}
	char s[64], d[64];
	snprintf(s, sizeof(s), "/proc/self/fd/%d", srcfd);
	snprintf(d, sizeof(d), "/proc/self/fd/%d", dstfd);
	int rc = mount(s, d, NULL, MS_BIND | MS_REC, NULL);
	if (rc == 0 && (flags & (MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC))) {
		/* reopen: the descriptor still names the directory below the new mount */
		close(dstfd);
		dstfd = in_root(rootfd, dst, O_PATH);
		snprintf(d, sizeof(d), "/proc/self/fd/%d", dstfd);
		rc = dstfd < 0 ? -1 : mount(NULL, d, NULL, MS_REMOUNT | MS_BIND | flags, NULL);
	}
	if (rc) {
		snprintf(why, size, "mount %s on %s: %s", src, dst, strerror(errno));
	}
	close(srcfd);
	if (dstfd >= 0)
		close(dstfd);
	return rc;
}

static int user_mounts(int rootfd, const char *spec, char *why, size_t size)
{
	char cwd[PATH_MAX];
	if (!getcwd(cwd, sizeof(cwd))) {
		snprintf(why, size, "getcwd: %s", strerror(errno));
		return -1;
	}
	char *copy = strdup(spec), *save = NULL;
	int rc = 0;
	if (!copy)
		return -1;
	for (char *entry = strtok_r(copy, ",", &save); entry && !rc;
	     entry = strtok_r(NULL, ",", &save)) {
		char *dst = strchr(entry, ':');
		char *flags = dst ? strchr(dst + 1, ':') : NULL;
		if (dst)
			*dst++ = '\0';
		if (flags)
			*flags++ = '\0';
		char src[PATH_MAX];
		/* a relative source is the step's working directory's, as for any path srun gets */
		if (entry[0] == '.')
			snprintf(src, sizeof(src), "%s/%s", cwd, entry);
		else
			snprintf(src, sizeof(src), "%s", entry);
		unsigned long mflags = 0;
		/* checked in init_post_opt: every word is a known flag */
		for (char *fs = NULL, *w = flags ? strtok_r(flags, "+", &fs) : NULL; w;
		     w = strtok_r(NULL, "+", &fs))
			mount_flag(w, &mflags);
		rc = bind_into(rootfd, src, dst ? dst : src, mflags, why, size);
	}
	free(copy);
	return rc;
}

static int remap_wanted(void)
{
	/* root is root already: no user namespace (the kernel refuses root's "0 0 1" map in a
	 * container without CAP_SETUID over the host's namespace) */
	return st.uid != 0 && (opt.remap_root != -1 ? opt.remap_root : conf.remap_root);
}

/* Into the container's root: it becomes the task's "/" (the step's mount namespace keeps the
 * Pod's mounts beside it, as Enroot's does; the container is an environment, not a boundary
 * against its own user, who could run the same programs on the node). */
static int enter_root(char *why, size_t size)
{
	if (fchdir(st.rootfd) || chroot(".") || chdir("/")) {
		snprintf(why, size, "chroot into %.900s: %s%s", st.rootfs, strerror(errno),
			 errno == EPERM ? " (the slurmd container needs CAP_SYS_CHROOT)" : "");
		return -1;
	}
	close(st.rootfd);
	st.rootfd = -1;
	return 0;
}

static int enter_container(char *why, size_t size)
{
	if (unshare(CLONE_NEWNS)) {
		snprintf(why, size, "unshare(CLONE_NEWNS): %s (the slurmd container needs "
			 "CAP_SYS_ADMIN)", strerror(errno));
		return -1;
	}
	if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL)) {
		snprintf(why, size, "make / private: %s", strerror(errno));
		return -1;
	}
	/* the root is a mount of its own: a read-only remount then leaves the Pod's file alone */
	if (mount(st.rootfs, st.rootfs, NULL, MS_BIND | MS_REC, NULL)) {
		snprintf(why, size, "bind %s: %s", st.rootfs, strerror(errno));
		return -1;
	}
	int rootfd = open(st.rootfs, O_PATH | O_DIRECTORY | O_CLOEXEC);
	if (rootfd < 0) {
		snprintf(why, size, "open %s: %s", st.rootfs, strerror(errno));
		return -1;
	}
	int writable = opt.writable != -1 ? opt.writable : conf.writable;
	int mount_home = opt.mount_home != -1 ? opt.mount_home : conf.mount_home;
	struct { const char *src, *dst; unsigned long flags; int optional; } sys[] = {
		{ "/proc", "/proc", 0, 0 },
		{ "/sys", "/sys", MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOEXEC, 0 },
		{ "/dev", "/dev", MS_NOSUID | MS_NOEXEC, 0 },
		{ st.tmp, "/tmp", MS_NOSUID | MS_NODEV, 0 },
		/* PMIx's server and client directories (mpi.conf PMIxCliTmpDirBase lives here) */
		{ SPOOL, SPOOL, MS_NOSUID | MS_NODEV, 1 },
		{ "/etc/hosts", "/etc/hosts", MS_RDONLY, 1 },
		{ "/etc/hostname", "/etc/hostname", MS_RDONLY, 1 },
		{ "/etc/resolv.conf", "/etc/resolv.conf", MS_RDONLY, 1 },
	};
	int rc = 0;
	for (size_t i = 0; i < sizeof(sys) / sizeof(sys[0]) && !rc; i++) {
		if (sys[i].optional && access(sys[i].src, F_OK))
			continue;
		rc = bind_into(rootfd, sys[i].src, sys[i].dst, sys[i].flags, why, size);
	}
	if (!rc && mount_home && st.home[0] && !access(st.home, F_OK))
		rc = bind_into(rootfd, st.home, st.home, MS_NOSUID | MS_NODEV, why, size);
	if (!rc && opt.mounts)
		rc = user_mounts(rootfd, opt.mounts, why, size);
	if (!rc && !writable &&
	    mount(NULL, st.rootfs, NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL)) {
		snprintf(why, size, "remount the container read-only: %s", strerror(errno));
		rc = -1;
	}
	close(rootfd);
	if (rc)
		return -1;
	/* the root, kept open for task_init (with --container-remap-root it enters from there,
	 * where the container's directories are the user's and the job's may not be) */
	st.rootfd = open(st.rootfs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (st.rootfd < 0) {
		snprintf(why, size, "open %s: %s", st.rootfs, strerror(errno));
		return -1;
	}
	/* chroot, not pivot_root: the runtime's default seccomp profile refuses pivot_root even
	 * with CAP_SYS_ADMIN. The kernel refuses a user namespace to a chrooted process, so with
	 * --container-remap-root task_init makes the user namespace first and chroots in it. */
	if (!remap_wanted() && enter_root(why, size))
		return -1;
	return 0;
}

int slurm_spank_task_init_privileged(spank_t sp, int ac, char **av)
{
	(void) sp;
	(void) ac;
	(void) av;
	if (!st.active)
		return 0;
	if (st.failure[0]) {
		slurm_error("%s: %s", TAG, st.failure);
		return -1;
	}
	/* as root and before the chroot: the container's directory is root's, and task_init
	 * (the user, in the container) applies it */
	if (load_image_env()) {
		slurm_error("%s: cannot read the image's environment %s: %s", TAG, st.env_file,
			    strerror(errno));
		return -1;
	}
	char why[1024];
	if (enter_container(why, sizeof(why))) {
		slurm_error("%s: container %s: %s", TAG, st.name, why);
		return -1;
	}
	return 0;
}

static int in_list(const char *list, const char *name, size_t len)
{
	for (const char *p = list; p && *p;) {
		const char *end = strchr(p, ',');
		size_t n = end ? (size_t) (end - p) : strlen(p);
		if (n == len && !strncmp(p, name, len))
			return 1;
		p = end ? end + 1 : NULL;
	}
	return 0;
}

static int remap_root(char *why, size_t size)
{
	uid_t uid = getuid();
	gid_t gid = getgid();
	char map[64];
	/* the task became the user from root, which leaves it non-dumpable: its /proc/self files
	 * are root's then, and the maps below could not be written (exec makes it dumpable
	 * anyway, as it runs no setuid program) */
	if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0)) {
		snprintf(why, size, "prctl(PR_SET_DUMPABLE): %s", strerror(errno));
		return -1;
	}
	if (unshare(CLONE_NEWUSER)) {
		snprintf(why, size, "unshare(CLONE_NEWUSER): %s", strerror(errno));
		return -1;
	}
	struct { const char *file, *text; } writes[3] = {
		{ "/proc/self/setgroups", "deny" }, { "/proc/self/uid_map", NULL },
		{ "/proc/self/gid_map", NULL },
	};
	char umap[64];
	snprintf(umap, sizeof(umap), "0 %u 1", (unsigned) uid);
	snprintf(map, sizeof(map), "0 %u 1", (unsigned) gid);
	writes[1].text = umap;
	writes[2].text = map;
	for (int i = 0; i < 3; i++) {
		int fd = open(writes[i].file, O_WRONLY | O_CLOEXEC);
		if (fd < 0 || write(fd, writes[i].text, strlen(writes[i].text)) < 0) {
			snprintf(why, size, "%s: %s", writes[i].file, strerror(errno));
			if (fd >= 0)
				close(fd);
			return -1;
		}
		close(fd);
	}
	return 0;
}

int slurm_spank_task_init(spank_t sp, int ac, char **av)
{
	(void) ac;
	(void) av;
	/* the cluster's defaults (compute.mpi.env) for every task, container or not: a job's own
	 * value wins, and in a container the image's (below) */
	for (int i = 0; i < conf.env_count; i++) {
		char *eq = strchr(conf.env[i], '=');
		*eq = '\0';
		spank_setenv(sp, conf.env[i], eq + 1, 0);
		*eq = '=';
	}
	if (!st.active)
		return 0;
	/* Pyxis drops the submitting locale unless asked to keep it: the image may lack it */
	static const char *locale[] = { "LANG", "LANGUAGE", "LC_ALL" };
	for (size_t i = 0; i < 3; i++)
		if (!in_list(opt.env, locale[i], strlen(locale[i])))
			spank_unsetenv(sp, locale[i]);
	if (image_env) {
		for (size_t i = 0; i < image_env_len;) {
			const char *kv = image_env + i;
			size_t len = strnlen(kv, image_env_len - i);
			const char *eq = memchr(kv, '=', len);
			if (eq && eq != kv) {
				char name[256];
				size_t nlen = (size_t) (eq - kv);
				if (nlen < sizeof(name)) {
					memcpy(name, kv, nlen);
					name[nlen] = '\0';
					int keep_job = in_list(opt.env, name, nlen);
					spank_setenv(sp, name, eq + 1, keep_job ? 0 : 1);
				}
			}
			i += len + 1;
		}
	}
	if (remap_wanted()) {
		char why[1024];
		if (remap_root(why, sizeof(why)) || enter_root(why, sizeof(why))) {
			slurm_error("%s: --container-remap-root: %s", TAG, why);
			return -1;
		}
	}
	/* here, not in the privileged hook: slurmstepd changes to the submitting directory after
	 * it. The image's WorkingDir may be missing or closed to the user ("/" then); a directory
	 * named with --container-workdir must be there. */
	if (chdir(st.workdir) && (opt.workdir || chdir("/"))) {
		slurm_error("%s: --container-workdir %s: %s", TAG, st.workdir, strerror(errno));
		return -1;
	}
	return 0;
}

static void remove_containers(const char *scope_arg, uint32_t job, uint32_t step)
{
	char j[16], s[16], out[256], err[1024];
	snprintf(j, sizeof(j), "%u", job);
	snprintf(s, sizeof(s), "%u", step);
	char *argv[] = { HELPER, "remove", "--runtime-path", conf.runtime_path, "--job", j,
			 (char *) scope_arg, s, NULL };
	if (!strcmp(scope_arg, "--all"))
		argv[7] = NULL; /* no step number */
	if (run_helper(argv, out, sizeof(out), err, sizeof(err)))
		slurm_error("%s: removing the containers of job %u: %s", TAG, job, err);
}

int slurm_spank_exit(spank_t sp, int ac, char **av)
{
	(void) ac;
	(void) av;
	if (spank_context() != S_CTX_REMOTE || !st.active)
		return 0;
	(void) sp;
	if (st.unnamed)
		remove_containers("--step", st.job, st.step);
	return 0;
}

int slurm_spank_job_epilog(spank_t sp, int ac, char **av)
{
	if (parse_config(ac, av))
		return 0; /* never drain a node over this plugin's configuration */
	uint32_t job;
	if (!conf.scope_job || spank_get_item(sp, S_JOB_ID, &job) != ESPANK_SUCCESS)
		return 0;
	char dir[PATH_MAX];
	snprintf(dir, sizeof(dir), "%s/jobs/%u", conf.runtime_path, job);
	if (access(dir, F_OK))
		return 0; /* no container of this job here: no helper to start */
	remove_containers("--all", job, 0);
	return 0;
}

