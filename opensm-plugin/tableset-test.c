/*
 * Checks of the table-set reader without OpenSM: a complete set loads and
 * answers by GUID; a truncated file, a manifest without its end, a file of
 * another set and inconsistent files are refused with a reason.
 */
#include "tableset.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char *LFTS =
	"Unicast lids [0-3] of switch Lid 1 guid 0x0000000000000001 ('s'):\n"
	"0x0001 000 # Switch portguid 0x0000000000000001: 's'\n"
	"0x0002 001 # Channel Adapter portguid 0x0000000000000011: 'h1'\n"
	"0x0003 002 # Channel Adapter portguid 0x0000000000000021: 'h2'\n"
	"3 lids dumped\n";
static const char *SL2VL =
	"Switch 0x0000000000000001, base LID 1, \"s\"\n"
	"#in out : 0  1  2  3  4  5  6  7  8  9  10 11 12 13 14 15\n"
	"0   1   : 0  1  0  1  0  1  0  1  0  1  0  1  0  1  0  1\n"
	"Channel Adapter 0x0000000000000011, base LID 2, \"h1\"\n"
	"0   0   : 0  1  2  3  0  1  2  3  0  1  2  3  0  1  2  3\n";
static const char *PATHSL =
	"# ibfabric path SLs\n"
	"# max_lid 3\n"
	"0x0002 ---1\n"
	"0x0003 --2-\n";

static int failures;

static void put(const char *dir, const char *name, const char *text)
{
	char p[512];
	FILE *f;
	snprintf(p, sizeof p, "%s/%s", dir, name);
	f = fopen(p, "w");
	if (!f || fputs(text, f) < 0 || fclose(f)) {
		perror(p);
		exit(1);
	}
}

static void manifest(const char *dir, const char *lfts, const char *sl2vl, const char *pathsl, int end)
{
	char m[2048];
	int n = snprintf(m, sizeof m, "ibfabric-tables 1\nengine test\ngeneration 7\n");
	n += snprintf(m + n, sizeof m - n, "file %s %zu %016llx\n", TS_LFTS, strlen(lfts),
		      (unsigned long long)ts_fnv1a(lfts, strlen(lfts)));
	if (sl2vl)
		n += snprintf(m + n, sizeof m - n, "file %s %zu %016llx\n", TS_SL2VL, strlen(sl2vl),
			      (unsigned long long)ts_fnv1a(sl2vl, strlen(sl2vl)));
	if (pathsl)
		n += snprintf(m + n, sizeof m - n, "file %s %zu %016llx\n", TS_PATHSL, strlen(pathsl),
			      (unsigned long long)ts_fnv1a(pathsl, strlen(pathsl)));
	if (end)
		snprintf(m + n, sizeof m - n, "end\n");
	put(dir, TS_MANIFEST, m);
}

#define CHECK(cond, ...) do { if (!(cond)) { failures++; fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
	fprintf(stderr, __VA_ARGS__); fputc('\n', stderr); } } while (0)

static void expect_refused(const char *dir, const char *needle, const char *what)
{
	struct tableset ts;
	char err[TS_ERR_LEN] = "";
	int rc = ts_load(dir, &ts, err, sizeof err);
	CHECK(rc != 0, "%s: loaded", what);
	if (rc == 0)
		ts_free(&ts);
	CHECK(strstr(err, needle) != NULL, "%s: reason '%s' lacks '%s'", what, err, needle);
}

int main(void)
{
	char dir[] = "/tmp/ibfabric-tableset-XXXXXX";
	struct tableset ts;
	char err[TS_ERR_LEN];
	const struct ts_sl2vl *row;

	if (!mkdtemp(dir)) {
		perror("mkdtemp");
		return 1;
	}
	/* FNV-1a 64 known answers, as the Rust side checks them. */
	CHECK(ts_fnv1a("", 0) == 0xcbf29ce484222325ULL, "fnv empty");
	CHECK(ts_fnv1a("foobar", 6) == 0x85944171f73967e8ULL, "fnv foobar");

	put(dir, TS_LFTS, LFTS);
	put(dir, TS_SL2VL, SL2VL);
	put(dir, TS_PATHSL, PATHSL);
	manifest(dir, LFTS, SL2VL, PATHSL, 1);
	CHECK(ts_load(dir, &ts, err, sizeof err) == 0, "complete set: %s", err);
	CHECK(ts.nsw == 1 && ts.sw[0].count == 3, "one switch, three rows");
	CHECK(ts_file_lid(&ts, 0x21) == 3, "LID of h2");
	CHECK(ts_path_sl(&ts, 2, 3) == 1 && ts_path_sl(&ts, 3, 2) == 2, "path SLs");
	CHECK(ts_path_sl(&ts, 2, 1) == -1, "no path to a switch");
	row = ts_find_sl2vl(&ts, 1, 0, 1);
	CHECK(row && row->vl[1] == 1 && row->vl[2] == 0, "switch SL-to-VL row");
	CHECK(ts.max_vl == 3, "max VL");
	ts_free(&ts);

	/* A file shorter than the manifest says: caught mid-write. */
	put(dir, TS_PATHSL, "# ibfabric path SLs\n# max_lid 3\n0x0002 ---1\n");
	expect_refused(dir, "bytes, the manifest says", "truncated path-sl.txt");
	/* Same length, other content: a file of another set. */
	put(dir, TS_PATHSL, "# ibfabric path SLs\n# max_lid 3\n0x0002 ---2\n0x0003 --2-\n");
	expect_refused(dir, "digest", "file of another set");
	put(dir, TS_PATHSL, PATHSL);
	manifest(dir, LFTS, SL2VL, PATHSL, 0);
	expect_refused(dir, "truncated", "manifest without 'end'");
	/* Files that match their digests but not each other. */
	{
		const char *wide = "# max_lid 4\n0x0002 ---1-\n0x0003 --2--\n";
		put(dir, TS_PATHSL, wide);
		manifest(dir, LFTS, SL2VL, wide, 1);
		expect_refused(dir, "different routings", "path SLs for another LID range");
		const char *nosrc = "# max_lid 3\n0x0002 ---1\n";
		put(dir, TS_PATHSL, nosrc);
		manifest(dir, LFTS, SL2VL, nosrc, 1);
		expect_refused(dir, "no SLs for source LID 0x0003", "a source without SLs");
		const char *foreign = "Switch 0x0000000000000009, base LID 1, \"x\"\n0 1 : 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0\n";
		put(dir, TS_SL2VL, foreign);
		put(dir, TS_PATHSL, PATHSL);
		manifest(dir, LFTS, foreign, PATHSL, 1);
		expect_refused(dir, "not a switch of the LFT dump", "SL-to-VL of another fabric");
		const char *open_block = "Unicast lids [0-3] of switch Lid 1 guid 0x0000000000000001 ('s'):\n"
			"0x0001 000 # Switch portguid 0x0000000000000001: 's'\n";
		put(dir, TS_LFTS, open_block);
		manifest(dir, open_block, NULL, NULL, 1);
		expect_refused(dir, "truncated", "LFT block without its end");
	}
	unlink(TS_MANIFEST);
	{
		char cmd[600];
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
		if (system(cmd) != 0)
			fprintf(stderr, "could not remove %s\n", dir);
	}
	if (failures) {
		fprintf(stderr, "tableset-test: %d failed\n", failures);
		return 1;
	}
	printf("tableset-test: all checks passed\n");
	return 0;
}
