//! The rpm tag table: the numbers of rpmtag.h, rpmds.h and rpmfiles.h
//! the rpm and source rpm writers use.

/// rpmtag.h / rpmds.h numbers used here.
pub(crate) mod tag {
    pub(crate) const SIG_SIZE: u32 = 1000;
    pub(crate) const SIG_PAYLOADSIZE: u32 = 1007;
    pub(crate) const SIG_SHA256: u32 = 273;
    pub(crate) const SIG_LONGSIZE: u32 = 270;
    pub(crate) const SIG_LONGARCHIVESIZE: u32 = 271;
    pub(crate) const I18NTABLE: u32 = 100;
    pub(crate) const NAME: u32 = 1000;
    pub(crate) const VERSION: u32 = 1001;
    pub(crate) const RELEASE: u32 = 1002;
    pub(crate) const SUMMARY: u32 = 1004;
    pub(crate) const DESCRIPTION: u32 = 1005;
    pub(crate) const BUILDTIME: u32 = 1006;
    pub(crate) const BUILDHOST: u32 = 1007;
    pub(crate) const SIZE: u32 = 1009;
    pub(crate) const LICENSE: u32 = 1014;
    pub(crate) const PACKAGER: u32 = 1015;
    pub(crate) const GROUP: u32 = 1016;
    pub(crate) const URL: u32 = 1020;
    pub(crate) const OS: u32 = 1021;
    pub(crate) const ARCH: u32 = 1022;
    pub(crate) const POSTIN: u32 = 1024;
    pub(crate) const PREUN: u32 = 1025;
    pub(crate) const FILESIZES: u32 = 1028;
    pub(crate) const FILEMODES: u32 = 1030;
    pub(crate) const FILERDEVS: u32 = 1033;
    pub(crate) const FILEMTIMES: u32 = 1034;
    pub(crate) const FILEDIGESTS: u32 = 1035;
    pub(crate) const FILELINKTOS: u32 = 1036;
    pub(crate) const FILEFLAGS: u32 = 1037;
    pub(crate) const FILEUSERNAME: u32 = 1039;
    pub(crate) const FILEGROUPNAME: u32 = 1040;
    pub(crate) const SOURCERPM: u32 = 1044;
    pub(crate) const FILEVERIFYFLAGS: u32 = 1045;
    pub(crate) const PROVIDENAME: u32 = 1047;
    pub(crate) const REQUIREFLAGS: u32 = 1048;
    pub(crate) const REQUIRENAME: u32 = 1049;
    pub(crate) const REQUIREVERSION: u32 = 1050;
    pub(crate) const RPMVERSION: u32 = 1064;
    pub(crate) const CHANGELOGTIME: u32 = 1080;
    pub(crate) const CHANGELOGNAME: u32 = 1081;
    pub(crate) const CHANGELOGTEXT: u32 = 1082;
    pub(crate) const POSTINPROG: u32 = 1086;
    pub(crate) const PREUNPROG: u32 = 1087;
    pub(crate) const FILEDEVICES: u32 = 1095;
    pub(crate) const FILEINODES: u32 = 1096;
    pub(crate) const FILELANGS: u32 = 1097;
    pub(crate) const CONFLICTFLAGS: u32 = 1053;
    pub(crate) const CONFLICTNAME: u32 = 1054;
    pub(crate) const CONFLICTVERSION: u32 = 1055;
    pub(crate) const PROVIDEFLAGS: u32 = 1112;
    pub(crate) const PROVIDEVERSION: u32 = 1113;
    pub(crate) const DIRINDEXES: u32 = 1116;
    pub(crate) const BASENAMES: u32 = 1117;
    pub(crate) const DIRNAMES: u32 = 1118;
    pub(crate) const PAYLOADFORMAT: u32 = 1124;
    pub(crate) const PAYLOADCOMPRESSOR: u32 = 1125;
    pub(crate) const PAYLOADFLAGS: u32 = 1126;
    pub(crate) const FILEDIGESTALGO: u32 = 5011;
    pub(crate) const ENCODING: u32 = 5062;
    pub(crate) const PAYLOADDIGEST: u32 = 5092;
    pub(crate) const PAYLOADDIGESTALGO: u32 = 5093;
}

/// Dependency sense flags (rpmds.h).
pub(crate) mod sense {
    pub(crate) const LESS: u32 = 1 << 1;
    pub(crate) const EQUAL: u32 = 1 << 3;
    pub(crate) const INTERP: u32 = 1 << 8;
    pub(crate) const SCRIPT_POST: u32 = 1 << 10;
    pub(crate) const SCRIPT_PREUN: u32 = 1 << 11;
    pub(crate) const RPMLIB: u32 = 1 << 24;
}

pub(crate) const SHA256_ALGO: u32 = 8;
/// `RPMFILE_CONFIG | RPMFILE_NOREPLACE` (rpmfiles.h): `%config(noreplace)`.
pub(crate) const CONFIG_NOREPLACE: u32 = 1 | (1 << 4);

/// Tags only a source rpm carries (rpmtag.h).
pub(crate) mod src_tag {
    pub(crate) const SOURCE: u32 = 1018;
    pub(crate) const PATCH: u32 = 1019;
    pub(crate) const BUILDARCHS: u32 = 1089;
    pub(crate) const COOKIE: u32 = 1094;
    pub(crate) const SOURCEPACKAGE: u32 = 1106;
    pub(crate) const PAYLOADDIGESTALT: u32 = 5097;
    pub(crate) const SPEC: u32 = 5099;
}

/// `RPMFILE_SPECFILE` (rpmfiles.h): the spec among a source rpm's files.
pub(crate) const SPECFILE: u32 = 1 << 5;
