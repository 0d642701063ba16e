//! The rpm tag table: the numbers of rpmtag.h, rpmds.h and rpmfiles.h
//! the rpm and source rpm writers use.

/// rpmtag.h / rpmds.h numbers used here.
pub mod tag {
    pub const SIG_SIZE: u32 = 1000;
    pub const SIG_PAYLOADSIZE: u32 = 1007;
    pub const SIG_SHA256: u32 = 273;
    pub const SIG_LONGSIZE: u32 = 270;
    pub const SIG_LONGARCHIVESIZE: u32 = 271;
    pub const I18NTABLE: u32 = 100;
    pub const NAME: u32 = 1000;
    pub const VERSION: u32 = 1001;
    pub const RELEASE: u32 = 1002;
    pub const SUMMARY: u32 = 1004;
    pub const DESCRIPTION: u32 = 1005;
    pub const BUILDTIME: u32 = 1006;
    pub const BUILDHOST: u32 = 1007;
    pub const SIZE: u32 = 1009;
    pub const LICENSE: u32 = 1014;
    pub const PACKAGER: u32 = 1015;
    pub const GROUP: u32 = 1016;
    pub const URL: u32 = 1020;
    pub const OS: u32 = 1021;
    pub const ARCH: u32 = 1022;
    pub const POSTIN: u32 = 1024;
    pub const PREUN: u32 = 1025;
    pub const FILESIZES: u32 = 1028;
    pub const FILEMODES: u32 = 1030;
    pub const FILERDEVS: u32 = 1033;
    pub const FILEMTIMES: u32 = 1034;
    pub const FILEDIGESTS: u32 = 1035;
    pub const FILELINKTOS: u32 = 1036;
    pub const FILEFLAGS: u32 = 1037;
    pub const FILEUSERNAME: u32 = 1039;
    pub const FILEGROUPNAME: u32 = 1040;
    pub const SOURCERPM: u32 = 1044;
    pub const FILEVERIFYFLAGS: u32 = 1045;
    pub const PROVIDENAME: u32 = 1047;
    pub const REQUIREFLAGS: u32 = 1048;
    pub const REQUIRENAME: u32 = 1049;
    pub const REQUIREVERSION: u32 = 1050;
    pub const RPMVERSION: u32 = 1064;
    pub const CHANGELOGTIME: u32 = 1080;
    pub const CHANGELOGNAME: u32 = 1081;
    pub const CHANGELOGTEXT: u32 = 1082;
    pub const POSTINPROG: u32 = 1086;
    pub const PREUNPROG: u32 = 1087;
    pub const FILEDEVICES: u32 = 1095;
    pub const FILEINODES: u32 = 1096;
    pub const FILELANGS: u32 = 1097;
    pub const CONFLICTFLAGS: u32 = 1053;
    pub const CONFLICTNAME: u32 = 1054;
    pub const CONFLICTVERSION: u32 = 1055;
    pub const PROVIDEFLAGS: u32 = 1112;
    pub const PROVIDEVERSION: u32 = 1113;
    pub const DIRINDEXES: u32 = 1116;
    pub const BASENAMES: u32 = 1117;
    pub const DIRNAMES: u32 = 1118;
    pub const PAYLOADFORMAT: u32 = 1124;
    pub const PAYLOADCOMPRESSOR: u32 = 1125;
    pub const PAYLOADFLAGS: u32 = 1126;
    pub const FILEDIGESTALGO: u32 = 5011;
    pub const ENCODING: u32 = 5062;
    pub const PAYLOADDIGEST: u32 = 5092;
    pub const PAYLOADDIGESTALGO: u32 = 5093;
}

/// Dependency sense flags (rpmds.h).
pub mod sense {
    pub const LESS: u32 = 1 << 1;
    pub const EQUAL: u32 = 1 << 3;
    pub const INTERP: u32 = 1 << 8;
    pub const SCRIPT_POST: u32 = 1 << 10;
    pub const SCRIPT_PREUN: u32 = 1 << 11;
    pub const RPMLIB: u32 = 1 << 24;
}

pub const SHA256_ALGO: u32 = 8;
/// `RPMFILE_CONFIG | RPMFILE_NOREPLACE` (rpmfiles.h): `%config(noreplace)`.
pub const CONFIG_NOREPLACE: u32 = 1 | (1 << 4);

/// Tags only a source rpm carries (rpmtag.h).
pub mod src_tag {
    pub const SOURCE: u32 = 1018;
    pub const PATCH: u32 = 1019;
    pub const BUILDARCHS: u32 = 1089;
    pub const COOKIE: u32 = 1094;
    pub const SOURCEPACKAGE: u32 = 1106;
    pub const PAYLOADDIGESTALT: u32 = 5097;
    pub const SPEC: u32 = 5099;
}

/// `RPMFILE_SPECFILE` (rpmfiles.h): the spec among a source rpm's files.
pub const SPECFILE: u32 = 1 << 5;
