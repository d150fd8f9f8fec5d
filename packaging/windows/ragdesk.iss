; Inno Setup 6 script for the Windows installer of ragdesk.
;
; Build on Windows (x64) from the source root, in the environment ragdesk is installed in:
;   python packaging\build.py                      -> dist\ragdesk\ (ragdesk.exe, ragdesk-gui.exe)
;   iscc /DAppVersion=0.1.0 packaging\windows\ragdesk.iss
;                                                  -> dist\ragdesk-0.1.0-windows-x64-setup.exe
; Relative paths below are relative to this file (Inno Setup's default SourceDir).
;
; Written and checked against the Inno Setup documentation (jrsoftware.org/ishelp); not built
; on the machine that wrote it. See packaging\README.md.

#ifndef AppVersion
  #define AppVersion "0.1.0"
#endif
#define AppName "ragdesk"
#define DistDir "..\..\dist\ragdesk"
#define GuiExe "ragdesk-gui.exe"

[Setup]
; The AppId identifies the app for upgrades and uninstall; never change it.
AppId={{F0E27590-E2CA-462C-A998-F80E1294C595}
AppName={#AppName}
AppVersion={#AppVersion}
AppVerName={#AppName} {#AppVersion}
AppPublisher=ragdesk developers
AppPublisherURL=https://github.com/ragdesk/ragdesk
DefaultDirName={autopf}\{#AppName}
DisableProgramGroupPage=yes
; Per-user install by default (no UAC prompt); the dialog offers an all-users install.
PrivilegesRequired=lowest
PrivilegesRequiredOverridesAllowed=dialog
ArchitecturesAllowed=x64compatible
ArchitecturesInstallIn64BitMode=x64compatible
MinVersion=10.0
OutputDir=..\..\dist
OutputBaseFilename={#AppName}-{#AppVersion}-windows-x64-setup
SetupIconFile=ragdesk.ico
UninstallDisplayIcon={app}\{#GuiExe}
UninstallDisplayName={#AppName} {#AppVersion}
WizardStyle=modern
; The bundle is about a gigabyte of mostly incompressible model weights and libraries.
Compression=lzma2/max
SolidCompression=yes
LZMAUseSeparateProcess=yes

[Languages]
Name: "english"; MessagesFile: "compiler:Default.isl"

[Tasks]
Name: "desktopicon"; Description: "{cm:CreateDesktopIcon}"; GroupDescription: "{cm:AdditionalIcons}"; Flags: unchecked

[Files]
; The whole PyInstaller folder: ragdesk.exe (console: CLI, --self-test), ragdesk-gui.exe,
; _internal\ and licenses\.
Source: "{#DistDir}\*"; DestDir: "{app}"; Flags: ignoreversion recursesubdirs createallsubdirs

[Icons]
Name: "{autoprograms}\{#AppName}"; Filename: "{app}\{#GuiExe}"; Comment: "Answer questions from local Wikipedia snapshots"
Name: "{autodesktop}\{#AppName}"; Filename: "{app}\{#GuiExe}"; Tasks: desktopicon

[Run]
Filename: "{app}\{#GuiExe}"; Description: "{cm:LaunchProgram,{#AppName}}"; Flags: nowait postinstall skipifsilent

; User data (catalog, snapshots, models, logs) lives in %LOCALAPPDATA%\ragdesk, outside {app};
; the uninstaller leaves it, like every other user document.
